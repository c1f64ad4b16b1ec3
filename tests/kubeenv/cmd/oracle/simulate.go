package main

// `oracle simulate FILE...`: one kube-scheduler over the whole snapshot, driven
// the way Scheduler.Run drives it (ScheduleOne in a loop), with every pending pod
// scheduled in queue order until the queue settles.
//
// The scheduler is scheduler.New's, over a fake clientset, with its own queue,
// cache, informers, event handlers, binding cycle and (asynchronous)
// preemption; percentageOfNodesToScore is the KubeSchedulerConfiguration's, else
// upstream's default (adaptive). What the API server would do is done by the fake
// clientset, plus one reactor: a pods/binding create sets spec.nodeName and the
// PodScheduled condition, as the binding REST storage does, so the informer sees
// the pod bound and the cache confirms the assumed pod.
//
// Two things differ from a scheduler in a cluster, both to make a run
// reproducible:
//   - Objects reach the informers in input order, and pending pods in queue order
//     (creationTimestamp, then input order), each pod's queue timestamp being its
//     creationTimestamp: the queue's clock is a fake clock, set to each pod's
//     creation time before it is created. The clock then stands still: backoff
//     never completes by itself, and an empty activeQ pops from backoffQ
//     (SchedulerPopFromBackoffQ), so nothing waits on wall time; unschedulable pods
//     stay in the unschedulable pool unless an event moves them.
//   - After each ScheduleOne the loop waits until the pod's binding cycle has
//     finished, its preemption (if any) has deleted its victims, and the
//     scheduler's event handlers have seen those binds and deletions, so the next
//     cycle starts from the same state on every run.
//
// The CPU time reported is the process's (every goroutine: the scheduling cycles,
// binding cycles, informers, event handlers, the fake clientset and the GC) from
// the first ScheduleOne to the last, set-up excluded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	testingclock "k8s.io/utils/clock/testing"
)

// SimPod is one pending pod's outcome, shaped as a `kopfsched simulate -o json` pod.
type SimPod struct {
	Namespace     string   `json:"namespace"`
	Name          string   `json:"name"`
	SchedulerName string   `json:"schedulerName"`
	Result        string   `json:"result"`
	Node          *string  `json:"node"`
	NominatedNode *string  `json:"nominatedNode"`
	Victims       []string `json:"victims"`
	Message       string   `json:"message"`
	Attempts      int      `json:"attempts"`

	uid          string
	firstFailure string
}

// SimNode is one node at the end of the run.
type SimNode struct {
	Name        string            `json:"name"`
	Pods        int               `json:"pods"`
	Allocatable map[string]string `json:"allocatable"`
	Requested   map[string]string `json:"requested"`
}

// watchedQueue is the scheduler's queue, counting the calls its event handlers
// make last when they handle a bind (Delete of the unassigned pod) or a bound
// pod's deletion (MoveAllToActiveOrBackoffQueue for AssignedPodDelete), and
// the set-up's adds.
type watchedQueue struct {
	internalqueue.SchedulingQueue
	adds, binds, deletes, nodeAdds, assignedAdds atomic.Int64
}

func (q *watchedQueue) Add(ctx context.Context, pod *v1.Pod) {
	q.SchedulingQueue.Add(ctx, pod)
	q.adds.Add(1)
	notify()
}

func (q *watchedQueue) Delete(logger klog.Logger, pod *v1.Pod) {
	q.SchedulingQueue.Delete(logger, pod)
	q.binds.Add(1)
	notify()
}

func (q *watchedQueue) MoveAllToActiveOrBackoffQueue(logger klog.Logger, event fwk.ClusterEvent, oldObj, newObj interface{},
	preCheck internalqueue.PreEnqueueCheck) {
	q.SchedulingQueue.MoveAllToActiveOrBackoffQueue(logger, event, oldObj, newObj, preCheck)
	switch {
	case event.Resource == fwk.Node && event.ActionType == fwk.Add:
		q.nodeAdds.Add(1)
		notify()
	case event.Label() == framework.EventAssignedPodAdd.Label():
		q.assignedAdds.Add(1)
		notify()
	case event.Label() == framework.EventAssignedPodDelete.Label() && newObj == nil:
		if pod, ok := oldObj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
			q.deletes.Add(1)
			notify()
		}
	}
}

// simulation is the state the loop and the hooks share.
type simulation struct {
	mu      sync.Mutex
	pods    map[string]*SimPod // by namespace/name
	order   []string
	current string // the pod of the running cycle
	// resolved: the current pod was bound or failed (its binding cycle runs after
	// ScheduleOne returns, and after the queue's Done).
	resolved bool
	binds    atomic.Int64
	deletes  atomic.Int64
	preempts []string // pods whose preemption may still run
	deleted  int
}

// generatedSuffix is the n-th generated-name suffix: five characters of the API server's
// alphabet (utilrand.String's), the least significant first.
func generatedSuffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	out := make([]byte, 5)
	for i := range out {
		out[i] = alphabet[n%len(alphabet)]
		n /= len(alphabet)
	}
	return string(out)
}

func queued(g basemetrics.GaugeMetric) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return 1 // look at the lists
	}
	return m.GetGauge().GetValue()
}

// hintsUsed is the number of pods OpportunisticBatching placed on a hint, over
// every profile.
func hintsUsed() float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		schedmetrics.BatchAttemptStats.Collect(ch)
		close(ch)
	}()
	total := 0.0
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			continue
		}
		for _, label := range out.GetLabel() {
			if label.GetName() == "result" && label.GetValue() == schedmetrics.BatchAttemptHintUsed {
				total += out.GetCounter().GetValue()
			}
		}
	}
	return total
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// globalConfig is the first KubeSchedulerConfiguration's percentageOfNodesToScore
// and parallelism, when set.
func (w *World) globalConfig() (*int32, *int32, error) {
	for _, raw := range w.configs {
		var fields struct {
			PercentageOfNodesToScore *int32 `json:"percentageOfNodesToScore"`
			Parallelism              *int32 `json:"parallelism"`
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, nil, err
		}
		if fields.PercentageOfNodesToScore != nil || fields.Parallelism != nil {
			return fields.PercentageOfNodesToScore, fields.Parallelism, nil
		}
	}
	return nil, nil, nil
}

// progress wakes waitFor: every hook that changes what it waits on sends to it
// (without blocking); waitFor also looks again every millisecond.
var progress = make(chan struct{}, 1)

func notify() {
	select {
	case progress <- struct{}{}:
	default:
	}
}

func waitFor(what string, deadline time.Duration, done func() bool) error {
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-progress:
		case <-tick.C:
		case <-timeout.C:
			return fmt.Errorf("timed out waiting for %s", what)
		}
	}
	return nil
}

func simulateAll(files []string) error {
	if len(files) == 0 {
		return errors.New("simulate: no snapshot files")
	}
	world, err := loadFiles(files)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.FromContext(ctx)
	profiles, err := world.schedulerProfiles()
	if err != nil {
		return err
	}
	percentage, parallelism, err := world.globalConfig()
	if err != nil {
		return err
	}

	var others []runtime.Object
	var nodes []*v1.Node
	var bound, pending []*v1.Pod
	for _, o := range world.objects {
		switch obj := o.(type) {
		case *v1.Node:
			nodes = append(nodes, obj)
		case *v1.Pod:
			switch {
			case obj.Status.Phase == v1.PodSucceeded || obj.Status.Phase == v1.PodFailed:
			case obj.Spec.NodeName != "":
				bound = append(bound, obj)
			default:
				pending = append(pending, obj)
			}
		default:
			others = append(others, o)
		}
	}
	// Queue order as simulate's: by creationTimestamp (the latest for a pod without one), then input order.
	var start time.Time
	for _, p := range pending {
		if p.CreationTimestamp.After(start) {
			start = p.CreationTimestamp.Time
		}
	}
	if start.IsZero() {
		start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	stamp := func(p *v1.Pod) time.Time {
		if p.CreationTimestamp.IsZero() {
			return start
		}
		return p.CreationTimestamp.Time
	}
	sort.SliceStable(pending, func(i, j int) bool { return stamp(pending[i]).Before(stamp(pending[j])) })

	sim := &simulation{pods: map[string]*SimPod{}}
	for _, p := range pending {
		sim.pods[podKey(p)] = &SimPod{Namespace: p.Namespace, Name: p.Name, SchedulerName: p.Spec.SchedulerName,
			Result: "Unschedulable", Victims: []string{}, uid: string(p.UID)}
	}

	// Resource versions as an API server keeps them: the object tracker stores none of its
	// own on the objects, and the scheduler's assume caches (ResourceClaims, PVs, PVCs) drop
	// an informer's update whose version they cannot compare, so that a claim allocated by
	// one pod's PreBind would still look free to the next pod. Every object gets one, every
	// write the next.
	var version int64
	for _, o := range world.objects {
		if m, err := meta.Accessor(o); err == nil {
			if v, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64); err == nil && v > version {
				version = v
			}
		}
	}
	nextVersion := func() string { version++; return strconv.FormatInt(version, 10) }
	for _, o := range others {
		if m, err := meta.Accessor(o); err == nil && m.GetResourceVersion() == "" {
			m.SetResourceVersion(nextVersion())
		}
	}
	// A plain object tracker: the field-managed one would charge server-side apply's
	// bookkeeping to the scheduler.
	client := fake.NewSimpleClientset(others...) //nolint:staticcheck
	tracker := client.Tracker()
	client.PrependReactor("*", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := action.(type) {
		case clienttesting.CreateAction:
			obj = a.GetObject()
		case clienttesting.UpdateAction:
			obj = a.GetObject()
		case clienttesting.PatchAction:
			// The tracker patches the object it holds: patch it here, then store it versioned.
			handled, patched, err := clienttesting.ObjectReaction(tracker)(action)
			if !handled || err != nil || patched == nil {
				return handled, patched, err
			}
			if m, err := meta.Accessor(patched); err == nil {
				m.SetResourceVersion(nextVersion())
			}
			return true, patched, tracker.Update(a.GetResource(), patched, a.GetNamespace())
		}
		if obj != nil {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetResourceVersion(nextVersion())
			}
		}
		return false, nil, nil
	})
	podsResource := v1.SchemeGroupVersion.WithResource("pods")
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create := action.(clienttesting.CreateAction)
		if create.GetSubresource() != "binding" {
			return false, nil, nil
		}
		binding := create.GetObject().(*v1.Binding)
		obj, err := tracker.Get(podsResource, binding.Namespace, binding.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		pod.Spec.NodeName = binding.Target.Name
		scheduled := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}
		replaced := false
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == v1.PodScheduled {
				pod.Status.Conditions[i], replaced = scheduled, true
			}
		}
		if !replaced {
			pod.Status.Conditions = append(pod.Status.Conditions, scheduled)
		}
		if err := tracker.Update(podsResource, pod, pod.Namespace); err != nil {
			return true, nil, err
		}
		sim.mu.Lock()
		if e := sim.pods[podKey(pod)]; e != nil {
			node := binding.Target.Name
			e.Result, e.Node = "Scheduled", &node
		}
		if podKey(pod) == sim.current {
			sim.resolved = true
		}
		sim.binds.Add(1)
		sim.mu.Unlock()
		notify()
		return true, binding, nil
	})
	// The API server names an object created with only a generateName (DynamicResources'
	// PreBind creates a pod's claim for its extended resources so); the object tracker does
	// not. Suffixes are counted, so that a run repeats, in the alphabet and form
	// kopfsched's in-memory client uses.
	generated := 0
	client.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create, ok := action.(clienttesting.CreateAction)
		if !ok || create.GetSubresource() != "" {
			return false, nil, nil
		}
		obj, err := meta.Accessor(create.GetObject())
		if err != nil || obj.GetName() != "" || obj.GetGenerateName() == "" {
			return false, nil, nil
		}
		generated++
		obj.SetName(obj.GetGenerateName() + generatedSuffix(generated))
		if obj.GetUID() == "" {
			obj.SetUID(types.UID("uid-" + obj.GetNamespace() + "-" + obj.GetName()))
		}
		return false, nil, nil
	})
	client.PrependReactor("delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		del := action.(clienttesting.DeleteAction)
		obj, err := tracker.Get(podsResource, del.GetNamespace(), del.GetName())
		if err != nil {
			return false, nil, nil
		}
		pod := obj.(*v1.Pod)
		sim.mu.Lock()
		if e := sim.pods[sim.current]; e != nil {
			e.Victims = append(e.Victims, podKey(pod))
		}
		if victim := sim.pods[podKey(pod)]; victim != nil {
			victim.Result = "Preempted"
		}
		sim.deleted++
		sim.mu.Unlock()
		if pod.Spec.NodeName != "" {
			sim.deletes.Add(1)
		}
		notify()
		return false, nil, nil
	})

	informerFactory := scheduler.NewInformerFactory(client, 0, nil)
	first := start
	if len(pending) > 0 {
		first = stamp(pending[0])
	}
	clock := testingclock.NewFakeClock(first)
	recorders := profile.RecorderFactory(func(string) events.EventRecorderLogger { return &events.FakeRecorder{} })
	options := []scheduler.Option{scheduler.WithProfiles(profiles...), scheduler.WithClock(clock),
		scheduler.WithPercentageOfNodesToScore(percentage)}
	if parallelism != nil {
		options = append(options, scheduler.WithParallelism(*parallelism))
	}
	sched, err := scheduler.New(ctx, client, informerFactory, nil, recorders, options...)
	if err != nil {
		return err
	}
	priorityQueue, ok := sched.SchedulingQueue.(*internalqueue.PriorityQueue)
	if !ok {
		return fmt.Errorf("the scheduler's queue is a %T", sched.SchedulingQueue)
	}
	queue := &watchedQueue{SchedulingQueue: sched.SchedulingQueue}
	sched.SchedulingQueue = queue
	next := sched.NextEntity
	sched.NextEntity = func(logger klog.Logger) (framework.QueuedEntityInfo, error) {
		entity, err := next(logger)
		if info, ok := entity.(*framework.QueuedPodInfo); ok && info.Pod != nil {
			key := podKey(info.Pod)
			sim.mu.Lock()
			sim.current, sim.resolved = key, false
			if e := sim.pods[key]; e != nil {
				if e.Attempts == 0 {
					sim.order = append(sim.order, key)
				}
				e.Attempts++
			}
			sim.mu.Unlock()
		}
		return entity, err
	}
	failed := sched.FailureHandler
	sched.FailureHandler = func(ctx context.Context, schedFramework framework.Framework, podInfo *framework.QueuedPodInfo,
		status *fwk.Status, nominatingInfo *fwk.NominatingInfo, start time.Time) {
		sim.mu.Lock()
		if e := sim.pods[podKey(podInfo.Pod)]; e != nil {
			e.Message = status.Message()
			if e.firstFailure == "" {
				e.firstFailure = e.Message
			}
			if nominatingInfo != nil && nominatingInfo.Mode() == fwk.ModeOverride {
				if name := nominatingInfo.NominatedNodeName; name != "" {
					e.NominatedNode = &name
					sim.preempts = append(sim.preempts, e.uid)
				}
			}
		}
		if podKey(podInfo.Pod) == sim.current {
			sim.resolved = true
		}
		sim.mu.Unlock()
		notify()
		failed(ctx, schedFramework, podInfo, status, nominatingInfo, start)
	}
	// The executors of the profiles' DefaultPreemption: whether a preemption still runs.
	var executors []*defaultpreemption.DefaultPreemption
	for _, f := range sched.Profiles {
		for _, pl := range f.PreEnqueuePlugins() {
			if dp, ok := pl.(*defaultpreemption.DefaultPreemption); ok {
				executors = append(executors, dp)
			}
		}
	}

	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return err
	}
	const window = 50 // the fake watch's channel holds 100 events
	wait := 30 * time.Second
	for i, n := range nodes {
		n = n.DeepCopy()
		n.ResourceVersion = ""
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if want := int64(i + 1 - window); want > 0 {
			if err := waitFor("nodes", wait, func() bool { return queue.nodeAdds.Load() >= want }); err != nil {
				return err
			}
		}
	}
	if err := waitFor("nodes", wait, func() bool { return queue.nodeAdds.Load() >= int64(len(nodes)) }); err != nil {
		return err
	}
	for i, p := range bound {
		p = p.DeepCopy()
		p.ResourceVersion = ""
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("pod %s: %w", podKey(p), err)
		}
		if want := int64(i + 1 - window); want > 0 {
			if err := waitFor("bound pods", wait, func() bool { return queue.assignedAdds.Load() >= want }); err != nil {
				return err
			}
		}
	}
	if err := waitFor("bound pods", wait, func() bool { return queue.assignedAdds.Load() >= int64(len(bound)) }); err != nil {
		return err
	}
	handled := 0
	for i, p := range pending {
		p = p.DeepCopy()
		p.ResourceVersion = ""
		// Distinct queue timestamps in queue order: equal ones would leave the heap's order to chance.
		at := stamp(p).Add(time.Duration(i) * time.Nanosecond)
		if at.After(clock.Now()) {
			clock.SetTime(at)
		}
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("pod %s: %w", podKey(p), err)
		}
		if _, ok := sched.Profiles[p.Spec.SchedulerName]; ok {
			handled++
			want := int64(handled)
			if err := waitFor("pending pods", wait, func() bool { return queue.adds.Load() >= want }); err != nil {
				return err
			}
		}
	}
	if start.After(clock.Now()) {
		clock.SetTime(start)
	}
	client.ClearActions()
	sched.SchedulingQueue.Run(logger)

	quiesce := func() error {
		return waitFor("the cycle's binds, preemptions and events", wait, func() bool {
			sim.mu.Lock()
			defer sim.mu.Unlock()
			if !sim.resolved || len(priorityQueue.InFlightPods()) != 0 {
				return false
			}
			if queue.binds.Load() < sim.binds.Load() || queue.deletes.Load() < sim.deletes.Load() {
				return false
			}
			for len(sim.preempts) > 0 {
				uid := sim.preempts[len(sim.preempts)-1]
				for _, dp := range executors {
					if dp.Executor.IsPodRunningPreemption(types.UID(uid)) {
						return false
					}
				}
				sim.preempts = sim.preempts[:len(sim.preempts)-1]
			}
			// A preemption's deletions are counted as they are made: look again after them.
			return queue.binds.Load() >= sim.binds.Load() && queue.deletes.Load() >= sim.deletes.Load()
		})
	}

	activeGauge, backoffGauge := schedmetrics.ActivePods(), schedmetrics.BackoffPods()
	budget := 20 * len(pending)
	if budget < 20 {
		budget = 20
	}
	cycles := 0
	settled := true
	if path := os.Getenv("ORACLE_CPUPROFILE"); path != "" { // where the loop's CPU goes: go tool pprof
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpuBefore, wallBefore := cpuSeconds(), time.Now()
	for {
		// The queue's own gauges, kept as its heaps change, say whether a pod waits; the lists
		// (a copy of every pod) only confirm the end.
		if queued(activeGauge)+queued(backoffGauge) <= 0 &&
			len(priorityQueue.PodsInActiveQ()) == 0 && len(priorityQueue.PodsInBackoffQ()) == 0 {
			break
		}
		if cycles == budget {
			settled = false
			break
		}
		sched.ScheduleOne(ctx)
		cycles++
		if err := quiesce(); err != nil {
			return err
		}
		client.ClearActions()
	}
	cpu, wall := cpuSeconds()-cpuBefore, time.Since(wallBefore).Seconds()
	pprof.StopCPUProfile()

	// Pods never attempted: gated by a PreEnqueue plugin, or of no profile.
	sim.mu.Lock()
	defer sim.mu.Unlock()
	attempted := map[string]bool{}
	for _, k := range sim.order {
		attempted[k] = true
	}
	for _, p := range pending {
		if !attempted[podKey(p)] {
			sim.order = append(sim.order, podKey(p))
		}
		e := sim.pods[podKey(p)]
		if e.Result == "Scheduled" {
			// simulate's rule: a pod bound after preempting shows its first failure (what it
			// showed in a cluster before its victims went); any other bound pod nothing.
			e.Message = ""
			if len(e.Victims) > 0 || e.NominatedNode != nil {
				e.Message = e.firstFailure
			}
		}
		if e.Attempts > 0 {
			continue
		}
		schedFramework, ok := sched.Profiles[p.Spec.SchedulerName]
		if !ok {
			e.Result, e.Message = "NotHandled", fmt.Sprintf("no profile named %q", p.Spec.SchedulerName)
			continue
		}
		for _, pl := range schedFramework.PreEnqueuePlugins() {
			if s := pl.PreEnqueue(ctx, p); !s.IsSuccess() {
				e.Result, e.Message = "Gated", s.Message()
				if len(p.Spec.SchedulingGates) > 0 {
					// What the pod shows: the API server's PodScheduled condition.
					e.Message = "Scheduling is blocked due to non-empty scheduling gates"
				}
				break
			}
		}
	}
	out := struct {
		Pods    []*SimPod      `json:"pods"`
		Nodes   []SimNode      `json:"nodes"`
		Summary map[string]any `json:"summary"`
		// ResourceClaims are the claims at the end, as the API server holds them (those the
		// scheduler created for extended resources backed by DRA among them), by namespace and name.
		ResourceClaims []resourcev1.ResourceClaim `json:"resourceClaims"`
		// ExtendedResourceClaimStatus is each pod's status.extendedResourceClaimStatus, when set.
		ExtendedResourceClaimStatus map[string]*v1.PodExtendedResourceClaimStatus `json:"extendedResourceClaimStatus"`
	}{Pods: []*SimPod{}, Nodes: []SimNode{}, ResourceClaims: []resourcev1.ResourceClaim{},
		ExtendedResourceClaimStatus: map[string]*v1.PodExtendedResourceClaimStatus{}}
	if claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{}); err == nil {
		out.ResourceClaims = claims.Items
		sort.Slice(out.ResourceClaims, func(i, j int) bool {
			a, b := out.ResourceClaims[i], out.ResourceClaims[j]
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		})
	}
	for _, p := range pending {
		if obj, err := tracker.Get(podsResource, p.Namespace, p.Name); err == nil {
			if status := obj.(*v1.Pod).Status.ExtendedResourceClaimStatus; status != nil {
				out.ExtendedResourceClaimStatus[podKey(p)] = status
			}
		}
	}
	counts := map[string]int{}
	for _, k := range sim.order {
		e := sim.pods[k]
		counts[e.Result]++
		if e.Result != "Preempted" {
			out.Pods = append(out.Pods, e)
		}
	}
	dump := sched.Cache.Dump()
	for _, n := range nodes {
		info := dump.Nodes[n.Name]
		node := SimNode{Name: n.Name, Allocatable: map[string]string{}, Requested: map[string]string{}}
		for name, q := range n.Status.Allocatable {
			node.Allocatable[string(name)] = q.String()
		}
		if info != nil {
			node.Pods = len(info.Pods)
			node.Requested["cpu"] = resource.NewMilliQuantity(info.Requested.MilliCPU, resource.DecimalSI).String()
			node.Requested["memory"] = resource.NewQuantity(info.Requested.Memory, resource.BinarySI).String()
			for name, v := range info.Requested.ScalarResources {
				node.Requested[string(name)] = resource.NewQuantity(v, resource.DecimalSI).String()
			}
		}
		out.Nodes = append(out.Nodes, node)
	}
	perPod := 0.0
	if counts["Scheduled"] > 0 {
		perPod = 1000 * cpu / float64(counts["Scheduled"])
	}
	out.Summary = map[string]any{
		"scheduled": counts["Scheduled"], "unschedulable": counts["Unschedulable"], "gated": counts["Gated"],
		"notHandled": counts["NotHandled"], "preempted": sim.deleted, "cycles": cycles, "settled": settled,
		"seconds": wall, "cpuSeconds": cpu, "cpuMsPerScheduledPod": perPod,
		"percentageOfNodesToScore": percentage, "batchHintsUsed": hintsUsed(),
	}
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(out)
}
