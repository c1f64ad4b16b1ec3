// Command oracle runs kube-scheduler's own framework, of the release go.mod
// pins, over a `kopfsched simulate` snapshot and prints what
// `kopfsched explain -o json` prints for each pending pod, so that the two can
// be compared field by field (tests/differential).
//
//	oracle run FILE...      every pending pod in queue order, each bound (or its
//	                        preemption applied) before the next; JSON {"pods": [...]}
//	oracle simulate FILE... one scheduler over the snapshot, every pending pod scheduled
//	                        in queue order as a running kube-scheduler does (simulate.go);
//	                        JSON shaped as `kopfsched simulate -o json`, with the CPU time
//	                        of the scheduling loop
//	oracle serve            one request per stdin line, {"files": [...], "pod": "ns/name"},
//	                        one explanation per stdout line, nothing applied
//
// In run and serve, each pod is evaluated by a scheduler built afresh (scheduler.New, the in-tree
// registry, the snapshot's KubeSchedulerConfiguration or SchedulerProfiles,
// else the default profile) over a fake clientset holding the snapshot, with
// informers synced and the pieces of schedulingCycle run as schedule_one.go
// runs them: RunPreFilterPlugins, RunFilterPluginsWithNominatedPods on every
// node (no sampling), RunPreScorePlugins and RunScorePlugins, the FitError
// with RunPostFilterPlugins' message, and DefaultPreemption's Evaluator dry
// run over every node where preemption might help.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

func main() {
	klog.SetLogger(logr.Discard())
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oracle run FILE... | oracle simulate FILE... | oracle serve")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runAll(os.Args[2:])
	case "simulate":
		err = simulateAll(os.Args[2:])
	case "serve":
		err = serve()
	default:
		fmt.Fprintf(os.Stderr, "oracle: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

func runAll(files []string) error {
	if len(files) == 0 {
		return errors.New("run: no snapshot files")
	}
	world, err := loadFiles(files)
	if err != nil {
		return err
	}
	var entries []*Entry
	for _, key := range world.pendingInQueueOrder() {
		entry, err := explain(world, key)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		entries = append(entries, entry)
		world.apply(entry)
	}
	if entries == nil {
		entries = []*Entry{}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"pods": entries})
}

type request struct {
	Files []string `json:"files"`
	Pod   string   `json:"pod"`
}

func serve() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var reply any
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			reply = map[string]string{"error": err.Error()}
		} else if world, err := loadFiles(req.Files); err != nil {
			reply = map[string]string{"error": err.Error()}
		} else if entry, err := explain(world, req.Pod); err != nil {
			reply = map[string]string{"error": err.Error()}
		} else {
			reply = entry
		}
		if err := out.Encode(reply); err != nil {
			return err
		}
	}
	return in.Err()
}
