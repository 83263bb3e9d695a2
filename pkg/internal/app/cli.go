package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/matememory/matememory/pkg/internal/config"
)

// Version is the build's version, stamped at build time by the Makefile and the image:
// -ldflags "-X github.com/matememory/matememory/pkg/internal/app.Version=v1.2.3". Without
// it, the version is read from what the go command embedded (see version).
var Version = "dev"

// version is the build's version: Version when the link stamped it; else the module's
// version (go install …@v1.2.3); else the commit the go command stamped (go build, or go
// run -buildvcs=true as make run does), with "-dirty" when the tree had changes; else "dev".
func version() string { return versionOf(Version, debug.ReadBuildInfo) }

func versionOf(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if stamped != "" && stamped != "dev" {
		return stamped
	}
	bi, ok := read()
	if !ok || bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Main is the body of every binary: flags, configuration, subcommands, signals.
// defaultTarget is the binary's own part ("api", "summarizer", ...); cmd/api defaults to the
// all-in-one target when no external NATS is configured.
func Main(defaultTarget string) int {
	// Help and completion use the name the binary was started by (the image's "matememory").
	return run(filepath.Base(os.Args[0]), defaultTarget, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
}

// exitError carries the exit code of a failure: 2 for bad usage, 1 for a failure at run time.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// Run parses args (without the program name) and runs the command they name. Help and
// --version exit 0, bad usage 2, a failure 1.
func Run(defaultTarget string, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	return run(defaultTarget, defaultTarget, args, stdin, stdout, stderr, environ)
}

func run(name, defaultTarget string, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	root := rootCommand(defaultTarget, stdin, stdout, stderr, environ)
	if name != "" && name != "." {
		root.Use = name
	}
	root.SetArgs(goStyleFlags(args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, ee.err)
		}
		return ee.code
	}
	// Errors from cobra itself: unknown command or flag, wrong arguments.
	fmt.Fprintf(stderr, "%v\nRun '%s --help' for usage.\n", err, root.Name())
	return 2
}

// goStyleFlags accepts the Go-style single-dash long flags the binaries always took
// (-config, -target=all, -agent 1): "-name..." with a name longer than one letter becomes
// "--name...". Arguments after "--" are left alone.
func goStyleFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && (a[1] >= 'a' && a[1] <= 'z') && (a[2] >= 'a' && a[2] <= 'z' || a[2] == '-') {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}

var descriptions = map[string]string{
	TargetAPI:        "MateMemory's REST API and MCP; without mate.nats.url the all-in-one process (API, workers and scheduler on an embedded NATS)",
	TargetSummarizer: "MateMemory's summarizer workers (memory extraction from completed conversations)",
	TargetEmergence:  "MateMemory's emergence workers (consolidation of daily notes into MEMORY.md)",
	TargetScheduler:  "MateMemory's cron scheduler (one leader among its replicas emits each slot once)",
}

func rootCommand(defaultTarget string, stdin io.Reader, stdout, stderr io.Writer, environ []string) *cobra.Command {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, environ: environ}
	var target string
	root := &cobra.Command{
		Use:           defaultTarget,
		Short:         descriptions[defaultTarget],
		Long:          descriptions[defaultTarget] + ".\n\nSettings come from a YAML file (--config, env MATE_CONFIG) and MATE_* environment variables; see docs/configuration.md.",
		Version:       version(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v\nRun '%s --help' for usage.", err, c.CommandPath())
	})
	root.PersistentFlags().StringVar(&c.cfgPath, "config", lookup(environ, "MATE_CONFIG"), "YAML configuration file (env MATE_CONFIG)")
	root.Flags().StringVar(&target, "target", "", "parts to run, comma-separated: all, api, summarizer, emergence, scheduler (default: this binary's part; api without mate.nats.url: all)")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		return c.withConfig(func(ctx context.Context, cfg config.Config, log *slog.Logger) int {
			return serve(ctx, cfg, log, defaultTarget, target, stderr)
		})
	}
	replayCmd := c.flagged("replay [--agent N] [--since T] [--until T] [--from-seq N] [--to-seq N] [--dry-run]",
		"Feed events stored on MATE_EVENTS through the summarizer again (idempotent)", replay)
	mcpCmd := c.flagged("mcp-stdio --agent N [--language zh|en]", "Serve one agent's memory tools over MCP on stdin/stdout",
		func(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, out, errw io.Writer) int {
			return mcpStdio(ctx, cfg, log, args, stdin, out, errw)
		})
	reindexCmd := c.flagged("reindex [--agent N]", "Index every memory file for search again (idempotent; progress and a summary)", reindex)
	evalCmd := c.flagged("eval [--set file.json] [--k 5] | eval memory [--days 30]", "Run the memory-search evaluation against the configured embedding endpoint, or (eval memory) a simulation of months of use against the configured model", evalRecall)
	exportC := c.flagged("export --agent N [--history] [--messages] [--ledger] [-o file]", "Write an agent's bundle (docs/bundle.md) from the database", exportCmd)
	importC := c.flagged("import --agent N [--mode empty|merge] [--dry-run] FILE", "Import a bundle into an agent (validated first; all or nothing; idempotent)", importCmd)
	eraseCmd := c.flagged("erase --agent N [--conversation ID] --confirm N|ID", "Erase every trace of an agent, or of one conversation, from every store (irreversible; prints the receipt)", eraseAgent)
	root.AddCommand(c.migrateCommand(), replayCmd, mcpCmd, reindexCmd, evalCmd, exportC, importC, eraseCmd)
	return root
}

// cli is what the commands share: the process's streams and environment, and the --config
// flag.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	environ        []string
	cfgPath        string
}

// load reads the configuration and builds the logger; it warns about MATE_* variables
// that name no setting.
func (c *cli) load() (config.Config, *slog.Logger, error) {
	cfg, err := config.Load(c.cfgPath, envLookup(c.environ))
	if err != nil {
		return cfg, nil, usageErr("%v", err)
	}
	log := cfg.Logger(c.stderr)
	for _, name := range config.UnknownEnv(c.environ) {
		if s := config.Suggest(name); s != "" {
			log.Warn("environment variable names no setting; ignored", "name", name, "did you mean", s)
		} else {
			log.Warn("environment variable names no setting; ignored (see docs/configuration.md)", "name", name)
		}
	}
	return cfg, log, nil
}

// exit maps a command's exit code to its error (nil for 0).
func exit(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code, err: errors.New("")}
}

// withConfig loads the configuration, runs fn until a signal and maps its exit code.
func (c *cli) withConfig(fn func(ctx context.Context, cfg config.Config, log *slog.Logger) int) error {
	cfg, log, err := c.load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return exit(fn(ctx, cfg, log))
}

// migrateCommand is `migrate` (apply, then list) and `migrate status` (list only).
func (c *cli) migrateCommand() *cobra.Command {
	run := func(apply bool) func(*cobra.Command, []string) error {
		return func(*cobra.Command, []string) error {
			return c.withConfig(func(ctx context.Context, cfg config.Config, _ *slog.Logger) int {
				return migrateDB(ctx, cfg, apply, c.stdout, c.stderr)
			})
		}
	}
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations, then list them all",
		Args:  cobra.NoArgs,
		RunE:  run(true),
	}
	migrate.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List every schema migration, applied (with its time) or pending; changes nothing",
		Args:  cobra.NoArgs,
		RunE:  run(false),
	})
	return migrate
}

// flagged is a command that keeps its own flag set (replay, mcp-stdio, reindex, eval, export,
// import and erase: their tests and docs use them); help is theirs, and exits 0.
func (c *cli) flagged(use, short string, run func(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return exit(run(context.Background(), config.Default(), slog.New(slog.DiscardHandler), []string{"-h"}, c.stdout, c.stdout))
			}
			return c.withConfig(func(ctx context.Context, cfg config.Config, log *slog.Logger) int {
				return run(ctx, cfg, log, args, c.stdout, c.stderr)
			})
		},
	}
}

// printJSON writes a command's result as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "--h", "-help", "--help":
			return true
		case "--":
			return false
		}
	}
	return false
}

// helpCode is the exit code for a flag set's parse error: 0 for -h (help was asked for).
func helpCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func lookup(environ []string, name string) string {
	v, _ := envLookup(environ)(name)
	return v
}

func envLookup(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
