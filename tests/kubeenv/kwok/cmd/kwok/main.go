// Command kwok runs upstream kwok's controller (sigs.k8s.io/kwok/pkg/kwok/cmd),
// as kwok's own main does, plus one subcommand of ours:
//
//	kwok stages    prints kwok's own default stages (fast node initialisation,
//	               node heartbeat through a Lease, pod ready / complete /
//	               delete) as one multi-document YAML for --config.
//
// The released kwok binary finds no stages without a config file; kwokctl
// writes these same embedded defaults for it. Printing them from kwok's
// module keeps them the ones of the pinned kwok release.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "stages" {
		stages := []string{
			nodefast.DefaultNodeInit,
			nodeheartbeat.DefaultNodeHeartbeatWithLease,
			podfast.DefaultPodReady,
			podfast.DefaultPodComplete,
			podfast.DefaultPodDelete,
		}
		for i, stage := range stages {
			stages[i] = strings.TrimSpace(stage)
		}
		fmt.Println(strings.Join(stages, "\n---\n"))
		return
	}

	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		os.Exit(1)
	}
	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		os.Exit(1)
	}
}
