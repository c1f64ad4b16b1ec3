// Command kubeenv is the test control plane: one binary that runs, one per
// process, upstream's own etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kubectl of the release go.mod pins.
//
//	kubeenv etcd --data-dir D --listen-client-urls URL ...
//	kubeenv kube-apiserver --secure-port N ...
//	kubeenv kube-controller-manager ...
//	kubeenv kube-scheduler --config F ...
//	kubeenv kubectl ...
//	kubeenv version
//
// Each subcommand takes exactly the flags of the upstream command it runs
// (the New*Command constructors of cmd/*/app): a flag's meaning is
// upstream's, documented there. One component per process, because
// server.SetupSignalHandler may run once per process.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeenv etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|version [flags]")
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "etcd":
		// etcdmain reads os.Args itself, with the program name first.
		etcdmain.Main(append([]string{"etcd"}, args...))
		return
	case "version":
		printVersions()
		return
	}
	switch name {
	case "kube-apiserver":
		c := apiserver.NewAPIServerCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	case "kube-controller-manager":
		c := controllermanager.NewControllerManagerCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	case "kube-scheduler":
		c := scheduler.NewSchedulerCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	case "kubectl":
		c := kubectlcmd.NewDefaultKubectlCommand()
		c.SetArgs(args)
		// As kubectl's own main: its errors printed its way, exit status 1.
		if err := cli.RunNoErrOutput(c); err != nil {
			cmdutil.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "kubeenv: unknown component %q\n", name)
		os.Exit(2)
	}
}

// printVersions prints the module versions this binary was built from, one
// "path version" per line, so a test can say which release it ran against.
func printVersions() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for _, m := range info.Deps {
		switch m.Path {
		case "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3":
			fmt.Println(m.Path, m.Version)
		}
	}
}
