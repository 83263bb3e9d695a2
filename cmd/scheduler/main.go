// Command scheduler runs MateMemory's scheduler part (see docs/architecture.md).
package main

import (
	"os"

	"github.com/matememory/matememory/pkg/app"
)

func main() { os.Exit(app.Main(app.TargetScheduler)) }
