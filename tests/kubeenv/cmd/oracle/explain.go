package main

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	feature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// NodeStatus is one infeasible node's verdict.
type NodeStatus struct {
	Plugin  string   `json:"plugin"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

// Candidate is one node where preemption makes room, with its victims.
type Candidate struct {
	Node          string   `json:"node"`
	Victims       []string `json:"victims"`
	PDBViolations int64    `json:"pdbViolations"`
}

// Preemption is what DefaultPreemption's evaluator finds, over every node.
type Preemption struct {
	Eligible   bool                  `json:"eligible"`
	Reason     string                `json:"reason"`
	Candidates []Candidate           `json:"candidates"`
	Chosen     *string               `json:"chosen"`
	Nodes      map[string]NodeStatus `json:"nodes"`
}

// Entry is one pod's explanation, shaped as `kopfsched explain -o json`.
type Entry struct {
	Namespace      string                      `json:"namespace"`
	Name           string                      `json:"name"`
	SchedulerName  string                      `json:"schedulerName"`
	Result         string                      `json:"result"`
	Node           *string                     `json:"node"`
	NominatedNode  *string                     `json:"nominatedNode"`
	Victims        []string                    `json:"victims"`
	Message        string                      `json:"message"`
	Filter         map[string]NodeStatus       `json:"filter"`
	Scores         map[string]map[string]int64 `json:"scores"`
	Weights        map[string]int32            `json:"weights"`
	EvaluatedNodes int                         `json:"evaluatedNodes"`
	FeasibleNodes  int                         `json:"feasibleNodes"`
	// TopNodes are the nodes sharing the best total (upstream picks one at random).
	TopNodes []string `json:"topNodes"`
	// NominatedNodeFits: the pod's earlier nomination passes every Filter, so
	// upstream binds it there without scoring (findNodesThatFitPod's
	// evaluateNominatedNode); Node is then that node, whatever the totals.
	NominatedNodeFits bool `json:"nominatedNodeFits,omitempty"`
	// NominationCleared: PostFilter found no candidate and cleared the pod's
	// earlier nomination (a PostFilterResult naming no node, ModeOverride).
	NominationCleared bool        `json:"nominationCleared,omitempty"`
	Preemption        *Preemption `json:"preemption"`
}

const configHeader = `{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"`

func decodeConfig(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("not a KubeSchedulerConfiguration: %T", obj)
	}
	return cfg, nil
}

// profiles are the snapshot's profiles (its KubeSchedulerConfigurations, then
// its SchedulerProfiles), defaulted as kube-scheduler defaults them, plus the
// default profile for default-scheduler unless one of them has that name.
func (w *World) schedulerProfiles() ([]schedconfig.KubeSchedulerProfile, error) {
	var out []schedconfig.KubeSchedulerProfile
	for _, raw := range w.configs {
		cfg, err := decodeConfig(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, cfg.Profiles...)
	}
	for _, raw := range w.profiles {
		cfg, err := decodeConfig([]byte(configHeader + `, "profiles": [` + string(raw) + `]}`))
		if err != nil {
			return nil, err
		}
		out = append(out, cfg.Profiles...)
	}
	for _, p := range out {
		if p.SchedulerName == v1.DefaultSchedulerName {
			return out, nil
		}
	}
	cfg, err := decodeConfig([]byte(configHeader + "}"))
	if err != nil {
		return nil, err
	}
	return append(out, cfg.Profiles...), nil
}

// cluster is one scheduler over the world, its informers synced.
type cluster struct {
	sched    *scheduler.Scheduler
	snapshot *internalcache.Snapshot
	client   *fake.Clientset
	profiles map[string]schedconfig.KubeSchedulerProfile
}

func newCluster(ctx context.Context, w *World) (*cluster, error) {
	profiles, err := w.schedulerProfiles()
	if err != nil {
		return nil, err
	}
	objects := make([]runtime.Object, len(w.objects))
	for i, o := range w.objects {
		objects[i] = o.DeepCopyObject()
	}
	client := fake.NewClientset(objects...)
	informerFactory := scheduler.NewInformerFactory(client, 0, nil)
	snapshot := internalcache.NewEmptySnapshot()
	recorders := profile.RecorderFactory(func(string) events.EventRecorderLogger { return &events.FakeRecorder{} })
	all := int32(100)
	sched, err := scheduler.New(ctx, client, informerFactory, nil, recorders,
		scheduler.WithProfiles(profiles...),
		scheduler.WithPercentageOfNodesToScore(&all),
		scheduler.WithNodeInfoSnapshot(snapshot),
	)
	if err != nil {
		return nil, err
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return nil, err
	}
	byName := map[string]schedconfig.KubeSchedulerProfile{}
	for _, p := range profiles {
		byName[p.SchedulerName] = p
	}
	return &cluster{sched: sched, snapshot: snapshot, client: client, profiles: byName}, nil
}

func explain(w *World, key string) (*Entry, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	target, _ := w.pod(key)
	if target == nil {
		return nil, fmt.Errorf("pod %q not found in the input", key)
	}
	c, err := newCluster(ctx, w)
	if err != nil {
		return nil, err
	}
	pod := target.DeepCopy()
	e := &Entry{
		Namespace: pod.Namespace, Name: pod.Name, SchedulerName: pod.Spec.SchedulerName,
		Result: "Unschedulable", Victims: []string{}, Filter: map[string]NodeStatus{},
		Scores: map[string]map[string]int64{}, Weights: map[string]int32{}, TopNodes: []string{},
	}
	schedFramework, ok := c.sched.Profiles[pod.Spec.SchedulerName]
	if !ok {
		e.Result = "NotHandled"
		e.Message = fmt.Sprintf("no profile named %q", pod.Spec.SchedulerName)
		return e, nil
	}
	for _, p := range schedFramework.ListPlugins().Score.Enabled {
		e.Weights[p.Name] = p.Weight
	}
	var gate *fwk.Status
	for _, pl := range schedFramework.PreEnqueuePlugins() {
		if s := pl.PreEnqueue(ctx, pod); !s.IsSuccess() {
			gate = s.WithPlugin(pl.Name())
			break
		}
	}
	if err := schedulingCycle(ctx, c, schedFramework, pod, e); err != nil {
		e.Result = "Error"
		e.Message = err.Error()
	}
	if gate != nil {
		e.Result = "Gated"
		e.Message = gate.Message()
		e.Node = nil // evaluated all the same, as explain does, but never attempted
	}
	return e, nil
}

// schedulingCycle is schedule_one.go's schedulingAlgorithm for one pod, with
// every node filtered and every feasible node scored.
func schedulingCycle(ctx context.Context, c *cluster, schedFramework framework.Framework, pod *v1.Pod, e *Entry) error {
	if err := c.sched.Cache.UpdateSnapshot(klog.FromContext(ctx), c.snapshot); err != nil {
		return err
	}
	state := framework.NewCycleState()
	allNodes, err := c.snapshot.ListNodesInPlacement()
	if err != nil {
		return err
	}
	if len(allNodes) == 0 {
		return scheduler.ErrNoNodesAvailable
	}
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	var feasible []fwk.NodeInfo
	preRes, s, unschedulablePlugins := schedFramework.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unschedulablePlugins
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return s.AsError()
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
	} else {
		nodes := allNodes
		if !preRes.AllNodes() {
			nodes = nil
			for name := range preRes.NodeNames {
				if info, err := c.snapshot.GetNodeInPlacement(name); err == nil {
					nodes = append(nodes, info)
				}
			}
			diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unschedulablePlugins))))
		}
		feasible, err = filterNodes(ctx, schedFramework, state, pod, &diagnosis, nodes)
		if err != nil {
			return err
		}
	}
	e.EvaluatedNodes = len(feasible) + diagnosis.NodeToStatus.Len()
	e.FeasibleNodes = len(feasible)
	feasibleNames := sets.New[string]()
	for _, n := range feasible {
		feasibleNames.Insert(n.Node().Name)
	}
	for _, n := range allNodes {
		name := n.Node().Name
		if feasibleNames.Has(name) {
			continue
		}
		st := diagnosis.NodeToStatus.Get(name)
		plugin := st.Plugin()
		if plugin == "" {
			plugin = joinPlugins(unschedulablePlugins)
		}
		e.Filter[name] = NodeStatus{Plugin: plugin, Code: st.Code().String(), Reasons: nonNil(st.Reasons())}
	}
	if len(feasible) == 0 {
		return postFilter(ctx, c, schedFramework, state, pod, diagnosis, len(allNodes), e)
	}
	return score(ctx, schedFramework, state, pod, feasible, e)
}

func filterNodes(ctx context.Context, schedFramework framework.Framework, state fwk.CycleState, pod *v1.Pod,
	diagnosis *framework.Diagnosis, nodes []fwk.NodeInfo) ([]fwk.NodeInfo, error) {
	statuses := make([]*fwk.Status, len(nodes))
	if schedFramework.HasFilterPlugins() {
		schedFramework.Parallelizer().Until(ctx, len(nodes), func(i int) {
			statuses[i] = schedFramework.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodes[i])
		}, "Filter")
	}
	var feasible []fwk.NodeInfo
	for i, st := range statuses {
		switch {
		case st.IsSuccess():
			feasible = append(feasible, nodes[i])
		case st.Code() == fwk.Error:
			return nil, st.AsError()
		default:
			diagnosis.NodeToStatus.Set(nodes[i].Node().Name, st)
			diagnosis.AddPluginStatus(st)
		}
	}
	return feasible, nil
}

func score(ctx context.Context, schedFramework framework.Framework, state fwk.CycleState, pod *v1.Pod,
	feasible []fwk.NodeInfo, e *Entry) error {
	e.Result = "Scheduled"
	var totals map[string]int64
	if schedFramework.HasScorePlugins() {
		if s := schedFramework.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
			return s.AsError()
		}
		scores, s := schedFramework.RunScorePlugins(ctx, state, pod, feasible)
		if !s.IsSuccess() {
			return s.AsError()
		}
		totals = map[string]int64{}
		for _, ns := range scores {
			per := map[string]int64{"total": ns.TotalScore}
			for _, ps := range ns.Scores {
				weight := int64(e.Weights[ps.Name])
				if weight == 0 {
					weight = 1
				}
				per[ps.Name] = ps.Score / weight // RunScorePlugins reports weighted scores
			}
			e.Scores[ns.Name] = per
			totals[ns.Name] = ns.TotalScore
		}
	} else {
		totals = map[string]int64{}
		for _, n := range feasible {
			totals[n.Node().Name] = 1 // prioritizeNodes without score plugins
		}
	}
	var best int64 = -1
	for name, t := range totals {
		if t > best {
			best, e.TopNodes = t, []string{name}
		} else if t == best {
			e.TopNodes = append(e.TopNodes, name)
		}
	}
	sort.Strings(e.TopNodes)
	// Ties are broken by name, so that a run is reproducible (upstream picks at random).
	e.Node = &e.TopNodes[0]
	if nominated := pod.Status.NominatedNodeName; nominated != "" {
		if _, fits := totals[nominated]; fits {
			e.Node, e.NominatedNodeFits = &nominated, true
		}
	}
	return nil
}

func postFilter(ctx context.Context, c *cluster, schedFramework framework.Framework, state fwk.CycleState, pod *v1.Pod,
	diagnosis framework.Diagnosis, numAllNodes int, e *Entry) error {
	fitErr := &framework.FitError{Pod: pod, NumAllNodes: numAllNodes, Diagnosis: diagnosis}
	if !schedFramework.HasPostFilterPlugins() {
		e.Message = fitErr.Error()
		e.Preemption = &Preemption{Reason: "the profile has no PostFilter plugin: preemption is off",
			Candidates: []Candidate{}, Nodes: map[string]NodeStatus{}}
		return nil
	}
	// The dry run over every node first: PostFilter's preemption deletes its victims.
	e.Preemption = dryRun(ctx, c, schedFramework, state, pod, diagnosis)
	result, status := schedFramework.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
	fitErr.Diagnosis.PostFilterMsg = status.Message()
	e.Message = fitErr.Error()
	if result != nil && result.NominatingInfo != nil && result.NominatingInfo.Mode() == fwk.ModeOverride &&
		result.NominatingInfo.NominatedNodeName == "" && pod.Status.NominatedNodeName != "" {
		e.NominationCleared = true
	}
	if result != nil && result.NominatingInfo != nil && result.NominatingInfo.NominatedNodeName != "" {
		name := result.NominatingInfo.NominatedNodeName
		e.NominatedNode = &name
		if e.Preemption != nil {
			e.Preemption.Chosen = &name
			for _, cand := range e.Preemption.Candidates {
				if cand.Node == name {
					e.Victims = cand.Victims
				}
			}
		}
	}
	return nil
}

func dryRun(ctx context.Context, c *cluster, schedFramework framework.Framework, state fwk.CycleState, pod *v1.Pod,
	diagnosis framework.Diagnosis) *Preemption {
	out := &Preemption{Candidates: []Candidate{}, Nodes: map[string]NodeStatus{}}
	pl := defaultPreemption(ctx, schedFramework, c.profiles[pod.Spec.SchedulerName])
	if pl == nil {
		out.Reason = "the profile's PostFilter plugins are not DefaultPreemption"
		return out
	}
	ok, why := pl.PodEligibleToPreemptOthers(ctx, pod, diagnosis.NodeToStatus.Get(pod.Status.NominatedNodeName))
	if !ok {
		out.Reason = why
		return out
	}
	out.Eligible = true
	potential, err := diagnosis.NodeToStatus.NodesForStatusCode(c.snapshot.NodeInfos(), fwk.Unschedulable)
	if err != nil || len(potential) == 0 {
		return out
	}
	pdbs, err := c.sched.Profiles[pod.Spec.SchedulerName].SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister().List(labels.Everything())
	if err != nil {
		out.Reason = err.Error()
		return out
	}
	candidates, statuses, err := pl.Evaluator.DryRunPreemption(ctx, state, pod, potential, pdbs, 0, int32(len(potential)))
	if err != nil {
		out.Reason = err.Error()
	}
	for _, cand := range candidates {
		victims := []string{}
		for _, v := range cand.Victims().Pods {
			victims = append(victims, podKey(v))
		}
		sort.Strings(victims)
		out.Candidates = append(out.Candidates, Candidate{Node: cand.Name(), Victims: victims,
			PDBViolations: cand.Victims().NumPDBViolations})
	}
	sort.Slice(out.Candidates, func(i, j int) bool { return out.Candidates[i].Node < out.Candidates[j].Node })
	for _, n := range potential {
		name := n.Node().Name
		if st := statuses.Get(name); st != nil && !st.IsSuccess() && statuses.Len() > 0 {
			if _, listed := nodeSet(out.Candidates)[name]; !listed {
				out.Nodes[name] = NodeStatus{Plugin: st.Plugin(), Code: st.Code().String(), Reasons: nonNil(st.Reasons())}
			}
		}
	}
	return out
}

// defaultPreemption is a DefaultPreemption of the profile's args over the
// profile's handle when the profile enables it at PostFilter: its Evaluator
// is the one PostFilter runs (the framework does not expose its plugins).
func defaultPreemption(ctx context.Context, schedFramework framework.Framework,
	cfg schedconfig.KubeSchedulerProfile) *defaultpreemption.DefaultPreemption {
	enabled := false
	for _, p := range schedFramework.ListPlugins().PostFilter.Enabled {
		enabled = enabled || p.Name == defaultpreemption.Name
	}
	if !enabled {
		return nil
	}
	var args runtime.Object = &schedconfig.DefaultPreemptionArgs{}
	for _, pc := range cfg.PluginConfig {
		if pc.Name == defaultpreemption.Name {
			args = pc.Args
		}
	}
	pl, err := defaultpreemption.New(ctx, args, schedFramework, plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate))
	if err != nil {
		return nil
	}
	return pl
}

func nodeSet(cands []Candidate) map[string]struct{} {
	out := map[string]struct{}{}
	for _, c := range cands {
		out[c.Node] = struct{}{}
	}
	return out
}

func joinPlugins(s sets.Set[string]) string {
	list := sets.List(s)
	out := ""
	for i, p := range list {
		if i > 0 {
			out += ","
		}
		out += p
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
