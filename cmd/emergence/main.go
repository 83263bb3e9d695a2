// Command emergence runs MateMemory's emergence part (see docs/architecture.md).
package main

import (
	"os"

	"github.com/matememory/matememory/pkg/app"
)

func main() { os.Exit(app.Main(app.TargetEmergence)) }
