// Package cli is Kontinue's command line (docs/cli.md): `kontinue get`,
// `diff`, `render`, `reconcile`, `events`, `trace`, `history`, `attest`, `verify`, `check`, `dashboard`, `crds`,
// `version`, `completion`; main adds `controller`. It is built with cobra;
// kubectl's connection flags (--kubeconfig, --context, -n, --as, --token,
// --server, --request-timeout, ...) are global and resolved by package
// clientconfig, as the controller's are. Invoked as kubectl-kontinue, the
// binary is a kubectl plugin and says `kubectl kontinue` in its usage.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/clientconfig"
	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/version"
)

// Env is what the command line runs with.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Program is the name the binary was invoked as (os.Args[0]): as
	// kubectl-kontinue it is a kubectl plugin and its usage says
	// "kubectl kontinue".
	Program string
	// WrapTransport, when set, wraps every client's transport (tests count
	// requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Now is the clock of AGE columns; nil: time.Now.
	Now func() time.Time
	// Getenv reads the environment ($NO_COLOR); nil: os.Getenv.
	Getenv func(string) string
}

// app is the state the commands share.
type app struct {
	env     Env
	cluster clientconfig.Flags
	root    *cobra.Command
}

// Root is the command line.
type Root struct {
	// Command is the root command; main adds the controller to it.
	Command *cobra.Command
	// Cluster are the global connection flags, for commands added by main.
	Cluster *clientconfig.Flags
	app     *app
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// UsageError marks err as a mistake in the command line (exit status 2),
// for commands added by main.
func UsageError(err error) error { return usageError{err.Error()} }

// PluginName is the name that makes the binary a kubectl plugin.
const PluginName = "kubectl-kontinue"

// New builds the command line.
func New(env Env) *Root {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	a := &app{env: env}
	a.cluster.WrapTransport = env.WrapTransport
	root := &cobra.Command{
		Use:   "kontinue",
		Short: "Kontinue, a supply-chain choreographer that speaks Cartographer's carto.run/v1alpha1 API",
		Long: `Kontinue walks Workloads and Deliverables through their ClusterSupplyChain or
ClusterDelivery. This binary is the controller (kontinue controller) and the
command line to look at and act on what it does.`,
		Version:           version.Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	if filepath.Base(env.Program) == PluginName {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl kontinue"}
	}
	a.root = root
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.Flags().Bool("version", false, "print the version and exit (as 'version')")
	root.SetVersionTemplate("kontinue {{.Version}}\n")
	a.cluster.Bind(root.PersistentFlags())
	// -n <TAB> lists namespaces, as kubectl's does (not files).
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeNamespace)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err.Error()} })
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { fmt.Fprint(c.OutOrStdout(), a.help(c)) })
	root.SetUsageFunc(func(c *cobra.Command) error { _, err := fmt.Fprint(c.OutOrStderr(), a.help(c)); return err })
	root.AddGroup(&cobra.Group{ID: "use", Title: "Look and act:"}, &cobra.Group{ID: "offline", Title: "Offline:"},
		&cobra.Group{ID: "run", Title: "Run and install:"}, &cobra.Group{ID: "other", Title: "Other:"})
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
	for _, c := range []*cobra.Command{getCommand(a), eventsCommand(a), traceCommand(a), historyCommand(a), doraCommand(a), attestCommand(a), verifyCommand(a), reconcileCommand(a), checkCommand(a), dashboardCommand(a)} {
		c.GroupID = "use"
		root.AddCommand(c)
	}
	d := diffCommand(a)
	d.GroupID = "use"
	root.AddCommand(d)
	ro := rolloutCommand(a)
	ro.GroupID = "use"
	root.AddCommand(ro)
	r := renderCommand(a)
	r.GroupID = "offline"
	root.AddCommand(r)
	c := crdsCommand(a)
	c.GroupID = "run"
	root.AddCommand(c)
	for _, c := range []*cobra.Command{versionCommand(a), optionsCommand(a)} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	return &Root{Command: root, Cluster: &a.cluster, app: a}
}

// Execute runs the command line with args (without the program name) and
// returns the exit status: 0 success, 1 an error, 2 a mistake in the
// command line.
func (r *Root) Execute(ctx context.Context, args []string) int {
	a := r.app
	a.root.InitDefaultHelpCmd()
	a.root.InitDefaultCompletionCmd(args...)
	for _, c := range a.root.Commands() {
		switch c.Name() {
		case "completion":
			c.Short = "print a shell completion script (bash, zsh, fish, powershell)"
			c.Example = completionExample
		case "help":
			c.Short = "help about a command"
		}
	}
	if a.root.Annotations[cobra.CommandDisplayNameAnnotation] != "" {
		replaceProgram(a.root, "kontinue ", a.root.DisplayName()+" ")
	}
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	a.root.SetArgs(args)
	cmd, err := a.root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = a.root
	}
	var ue usageError
	usage := errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ")
	msg := strings.TrimRight(err.Error(), "\n")
	// cobra's "unknown command "x" for "kontinue"": the prefix names it already.
	msg = strings.Replace(msg, fmt.Sprintf(" for %q", cmd.CommandPath()), "", 1)
	fmt.Fprintf(a.env.Stderr, "%s: %s\n", cmd.CommandPath(), msg)
	if usage && strings.Contains(msg, "\n") {
		fmt.Fprintln(a.env.Stderr)
	}
	if usage {
		fmt.Fprintf(a.env.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	}
	return 1
}

const completionExample = `  # bash: now, and in every new shell
  source <(kontinue completion bash)
  kontinue completion bash > /etc/bash_completion.d/kontinue

  # zsh, fish
  kontinue completion zsh > "${fpath[1]}/_kontinue"
  kontinue completion fish > ~/.config/fish/completions/kontinue.fish

  # As a kubectl plugin (kubectl 1.26+ asks kubectl_complete-kontinue):
  printf '#!/bin/sh\nexec kubectl-kontinue __complete "$@"\n' > ~/bin/kubectl_complete-kontinue
  chmod +x ~/bin/kubectl_complete-kontinue`

// replaceProgram makes examples say how the binary was invoked.
func replaceProgram(c *cobra.Command, from, to string) {
	c.Example = strings.ReplaceAll(c.Example, "  "+from, "  "+to)
	for _, sub := range c.Commands() {
		replaceProgram(sub, from, to)
	}
}

// Main runs the command line (without the controller) with args and
// returns the exit status. SIGINT and SIGTERM end a --watch.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, args, stdin, stdout, stderr)
}

// MainContext is Main, stopped (a --watch ends cleanly) when ctx is done.
func MainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return New(Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Program: "kontinue"}).Execute(ctx, args)
}

// ExactArgs, RangeArgs and NoArgs check positional arguments with a usage
// error that says what is wanted.
func exactArgs(n int, want string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s", want)
		}
		return nil
	}
}

func rangeArgs(min, max int, want string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usagef("want %s", want)
		}
		return nil
	}
}

// NoArgs refuses positional arguments.
func NoArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments (got %q)", c.Name(), args)
	}
	return nil
}

// dynamicClient loads the cluster configuration and makes a client; what
// names the program in the User-Agent.
func (a *app) dynamicClient(what string) (dynamic.Interface, *clientconfig.Loaded, error) {
	loaded, err := a.cluster.Load()
	if err != nil {
		return nil, nil, err
	}
	loaded.Config.UserAgent = what + "/" + version.Version
	dyn, err := dynamic.NewForConfig(loaded.Config)
	if err != nil {
		return nil, nil, err
	}
	return dyn, loaded, nil
}

func (a *app) isTerminal() bool {
	f, ok := a.env.Stdout.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colorFlag adds --color to a command that colours its output.
func colorFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "color", "auto", "colour: auto (when stdout is a terminal and $NO_COLOR is unset), always, never")
}

// useColor resolves --color.
func (a *app) useColor(v string) (bool, error) {
	switch v {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		return a.isTerminal() && a.env.Getenv("NO_COLOR") == "", nil
	}
	return false, usagef("--color must be auto, always or never")
}

// help is the help of a command: what it does, usage, examples, its own
// flags. The global connection flags are listed by `kontinue options`
// only, as kubectl does, so that every command's help stays short.
func (a *app) help(c *cobra.Command) string {
	var b strings.Builder
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	if desc != "" {
		b.WriteString(strings.TrimSpace(desc) + "\n\n")
	}
	b.WriteString("Usage:\n")
	if c.Runnable() {
		fmt.Fprintf(&b, "  %s\n", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "  %s [command]\n", c.CommandPath())
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(&b, "\nAliases:\n  %s\n", strings.Join(append([]string{c.Name()}, c.Aliases...), ", "))
	}
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
	if c.HasAvailableSubCommands() {
		groups := c.Groups()
		printCmds := func(title, group string) {
			var lines []string
			for _, sub := range c.Commands() {
				if sub.IsAvailableCommand() && sub.GroupID == group {
					lines = append(lines, fmt.Sprintf("  %-12s %s", sub.Name(), sub.Short))
				}
			}
			if len(lines) > 0 {
				fmt.Fprintf(&b, "\n%s\n%s\n", title, strings.Join(lines, "\n"))
			}
		}
		for _, g := range groups {
			printCmds(g.Title, g.ID)
		}
		title := "Commands:"
		if len(groups) > 0 {
			title = "Other commands:"
		}
		printCmds(title, "")
	}
	own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	own.SortFlags = false
	global := a.root.PersistentFlags()
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if global.Lookup(f.Name) == nil && !f.Hidden {
			own.AddFlag(f)
		}
	})
	if u := own.FlagUsages(); u != "" {
		fmt.Fprintf(&b, "\nFlags:\n%s", u)
	}
	root := a.root.CommandPath()
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s COMMAND --help' for a command's flags and examples.", c.CommandPath())
	}
	if c.Name() != "options" {
		fmt.Fprintf(&b, "\nGlobal flags reach the cluster as kubectl's do (--kubeconfig, --context, -n, --as, --token, ...): '%s options' lists them.\n", root)
	} else {
		b.WriteString("\n")
	}
	return b.String()
}

func optionsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "list the global flags (kubectl's connection flags)",
		Long: `The global flags every command takes: they pick the cluster, the user and the
namespace as kubectl's do, for the commands and for the controller alike.
Without --kubeconfig: the files of $KUBECONFIG (merged, the first file that
sets a value wins), else ~/.kube/config, else the in-cluster configuration.`,
		Example: "  kontinue --context prod -n dev get workloads\n  kontinue get workload app --as jane --request-timeout 5s",
		Args:    NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "Global flags:\n%s", a.root.PersistentFlags().FlagUsages())
			return nil
		},
	}
}

func versionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print Kontinue's version",
		Long:    "Print the version the binary was built as (make build stamps git describe; a plain go build says dev). Also: kontinue --version.",
		Example: "  kontinue version\n  kontinue --version",
		Args:    NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), version.String())
			return nil
		},
	}
}

func crdsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "crds",
		Short: "print the CustomResourceDefinitions",
		Long: `Print the CustomResourceDefinitions of carto.run/v1alpha1 this binary serves,
as YAML (the same as deploy/crds.yaml). Apply them with server-side apply.`,
		Example: "  kontinue crds | kubectl apply --server-side -f -",
		Args:    NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := c.OutOrStdout().Write(crds.YAML())
			return err
		},
	}
}

// suggest returns the candidates closest to s (for "did you mean").
func suggest(s string, candidates []string) []string {
	var out []string
	for _, c := range candidates {
		if d := levenshtein(s, c); d <= 2 || (len(s) > 2 && strings.HasPrefix(c, s)) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
