// Package cli is Kontinue's command line, in the same binary as the
// controller: `kontinue get`, `render`, `reconcile`, `dashboard`, `version`
// (docs/cli.md).
// Flags follow kubectl's: --kubeconfig, --context, -n/--namespace,
// -A/--all-namespaces, -o.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"kontinue.dev/kontinue/clientconfig"
	"kontinue.dev/kontinue/version"
)

// command is one subcommand.
type command struct {
	name, short, usage, examples string
	run                          func(e *env, args []string) error
	flags                        func(fs *pflag.FlagSet, e *env)
	cluster                      bool // takes --kubeconfig, --context, -n
}

func commands() []*command {
	return []*command{getCommand(), renderCommand(), reconcileCommand(), dashboardCommand(), versionCommand()}
}

// IsCommand tells whether arg names a CLI subcommand (or help). -h and
// --help are not: they are the controller's.
func IsCommand(arg string) bool {
	if arg == "help" {
		return true
	}
	for _, c := range commands() {
		if c.name == arg {
			return true
		}
	}
	return false
}

// env is what a command runs with.
type env struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	color          bool
	cfg            clientconfig.Flags
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// Main runs the CLI with args (the subcommand first) and returns the exit
// status. SIGINT and SIGTERM end a --watch.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, args, stdin, stdout, stderr)
}

// MainContext is Main, stopped (a --watch ends cleanly) when ctx is done.
func MainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			for _, c := range commands() {
				if c.name == args[1] {
					return MainContext(ctx, []string{c.name, "--help"}, stdin, stdout, stderr)
				}
			}
		}
		topUsage(stdout)
		return 0
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "kontinue: unknown command %q\n", args[0])
		topUsage(stderr)
		return 2
	}
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	fs := pflag.NewFlagSet("kontinue "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are printed below, once
	fs.SortFlags = false
	if cmd.cluster {
		fs.StringVar(&e.cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, which may list several files, else ~/.kube/config)")
		fs.StringVar(&e.cfg.Context, "context", "", "kubeconfig context (default: the current context)")
		fs.StringVarP(&e.cfg.Namespace, "namespace", "n", "", "namespace (default: the context's namespace)")
	}
	if cmd.flags != nil {
		cmd.flags(fs, e)
	}
	colorFlag := "auto"
	if cmd.name == "get" {
		fs.StringVar(&colorFlag, "color", "auto", "colour the tree: auto (when stdout is a terminal and $NO_COLOR is unset), always, never")
	}
	fs.Usage = func() {
		flags := fs.FlagUsages()
		if flags == "" {
			flags = "  (none)\n"
		}
		fmt.Fprintf(fs.Output(), "%s\n\nUsage:\n  %s\n\nExamples:\n%s\nFlags:\n%s", cmd.short, cmd.usage, cmd.examples, flags)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "kontinue %s: %v\nRun 'kontinue %s --help' for usage.\n", cmd.name, err, cmd.name)
		return 2
	}
	switch colorFlag {
	case "always":
		e.color = true
	case "never":
	case "auto":
		e.color = isTerminal(stdout) && os.Getenv("NO_COLOR") == ""
	default:
		fmt.Fprintf(stderr, "kontinue %s: --color must be auto, always or never\n", cmd.name)
		return 2
	}
	if err := cmd.run(e, fs.Args()); err != nil {
		fmt.Fprintf(stderr, "kontinue %s: %v\n", cmd.name, err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "Run 'kontinue %s --help' for usage.\n", cmd.name)
			return 2
		}
		return 1
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func topUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("Kontinue, a supply-chain choreographer that speaks Cartographer's carto.run/v1alpha1 API.\n\n")
	b.WriteString("Usage:\n  kontinue [flags]            run the controller (kontinue --help lists its flags)\n")
	b.WriteString("  kontinue crds               print the CustomResourceDefinitions\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  kontinue %-18s %s\n", c.name, c.short)
	}
	b.WriteString("\nRun 'kontinue COMMAND --help' for a command's flags and examples. Documentation: docs/cli.md.\n")
	fmt.Fprint(w, b.String())
}

func versionCommand() *command {
	return &command{
		name: "version", short: "print Kontinue's version",
		usage:    "kontinue version   (or kontinue --version)",
		examples: "  kontinue version\n",
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("version takes no arguments")
			}
			fmt.Fprintln(e.stdout, version.String())
			return nil
		},
	}
}
