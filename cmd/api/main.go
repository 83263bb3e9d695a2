// Command api runs MateMemory's REST API. Without an external NATS URL it runs the
// all-in-one mode (API, summarizer, emergence worker and scheduler in one process on an
// embedded NATS server and SQLite), which is what `make run` starts.
//
//	api [-config file.yaml] [-target all|api|...]   serve
//	api migrate [status]                             apply (or list) schema migrations
package main

import (
	"os"

	"github.com/matememory/matememory/pkg/app"
)

func main() { os.Exit(app.Main(app.TargetAPI)) }
