package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	// The API server's defaulting of the kinds the scheduler reads (requests
	// from limits, allocatable from capacity, port protocols, ...).
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
)

// World is a snapshot: the API objects in input order and the raw
// scheduler configuration documents.
type World struct {
	objects []runtime.Object
	// configs are KubeSchedulerConfiguration documents, as JSON.
	configs [][]byte
	// profiles are SchedulerProfile specs turned into KubeSchedulerProfile JSON.
	profiles [][]byte
}

func loadFiles(files []string) (*World, error) {
	w := &World{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := w.load(data); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	w.admit()
	return w, nil
}

func (w *World) load(data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := w.add(doc); err != nil {
			return err
		}
	}
}

func (w *World) add(doc map[string]any) error {
	if doc == nil {
		return nil
	}
	kind, _ := doc["kind"].(string)
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	switch kind {
	case "List":
		items, _ := doc["items"].([]any)
		for _, item := range items {
			m, _ := item.(map[string]any)
			if err := w.add(m); err != nil {
				return err
			}
		}
		return nil
	case "KubeSchedulerConfiguration":
		w.configs = append(w.configs, raw)
		return nil
	case "SchedulerProfile":
		spec, _ := doc["spec"].(map[string]any)
		profile := map[string]any{}
		for _, k := range []string{"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"} {
			if v, ok := spec[k]; ok {
				profile[k] = v
			}
		}
		if _, ok := profile["schedulerName"]; !ok {
			meta, _ := doc["metadata"].(map[string]any)
			profile["schedulerName"] = meta["name"]
		}
		p, err := json.Marshal(profile)
		if err != nil {
			return err
		}
		w.profiles = append(w.profiles, p)
		return nil
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		// Kinds the scheduler never reads (and client-go does not know).
		return nil
	}
	legacyscheme.Scheme.Default(obj)
	w.objects = append(w.objects, obj)
	return nil
}

// admit does what admission would have done to the pods: a namespace, a UID
// (the scheduler's cache keys pods by UID), and the priority of their
// PriorityClass (or the global default).
func (w *World) admit() {
	classes := map[string]*schedulingv1.PriorityClass{}
	var globalDefault *schedulingv1.PriorityClass
	for _, o := range w.objects {
		if pc, ok := o.(*schedulingv1.PriorityClass); ok {
			classes[pc.Name] = pc
			if pc.GlobalDefault && (globalDefault == nil || pc.Value > globalDefault.Value) {
				globalDefault = pc
			}
		}
	}
	for _, o := range w.objects {
		pod, ok := o.(*v1.Pod)
		if !ok {
			continue
		}
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		if pod.UID == "" {
			pod.UID = types.UID(pod.Namespace + "/" + pod.Name)
		}
		if pod.Spec.SchedulerName == "" {
			pod.Spec.SchedulerName = v1.DefaultSchedulerName
		}
		mutatePodAffinity(pod)
		if pod.Spec.Priority != nil {
			continue
		}
		var pc *schedulingv1.PriorityClass
		if pod.Spec.PriorityClassName != "" {
			pc = classes[pod.Spec.PriorityClassName]
		} else {
			pc = globalDefault
		}
		var value int32
		if pc != nil {
			value = pc.Value
			if pod.Spec.PreemptionPolicy == nil && pc.PreemptionPolicy != nil {
				policy := *pc.PreemptionPolicy
				pod.Spec.PreemptionPolicy = &policy
			}
		}
		pod.Spec.Priority = &value
	}
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

func (w *World) pod(key string) (*v1.Pod, int) {
	for i, o := range w.objects {
		if pod, ok := o.(*v1.Pod); ok && podKey(pod) == key {
			return pod, i
		}
	}
	return nil, -1
}

// pendingInQueueOrder lists the unbound, non-terminal pods by
// creationTimestamp, then input order, as simulate enqueues them.
func (w *World) pendingInQueueOrder() []string {
	var pods []*v1.Pod
	for _, o := range w.objects {
		if pod, ok := o.(*v1.Pod); ok && pod.Spec.NodeName == "" &&
			pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
			pods = append(pods, pod)
		}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
	})
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = podKey(p)
	}
	return keys
}

// apply makes the entry's outcome part of the world, as the scheduler's
// binding (or preemption) would: a scheduled pod is bound to its node; a
// preemptor's victims are deleted, lower-priority pods nominated to the same
// node lose their nomination, and the preemptor is nominated; a pod for which
// preemption found no candidate loses its earlier nomination. A gated pod is
// never attempted: its evaluation changes nothing.
func (w *World) apply(e *Entry) {
	pod, _ := w.pod(e.Namespace + "/" + e.Name)
	if pod == nil || e.Result == "Gated" {
		return
	}
	switch {
	case e.NominationCleared:
		pod.Status.NominatedNodeName = ""
	case e.Result == "Scheduled" && e.Node != nil:
		pod.Spec.NodeName = *e.Node
		pod.Status.NominatedNodeName = ""
		// It starts a year after its creation (tests/differential/harness.py's rule):
		// preemption orders equal-priority victims by start time.
		started := metav1.NewTime(pod.CreationTimestamp.AddDate(1, 0, 0))
		pod.Status.StartTime = &started
	case e.NominatedNode != nil:
		for _, victim := range e.Victims {
			if _, i := w.pod(victim); i >= 0 {
				w.objects = append(w.objects[:i], w.objects[i+1:]...)
			}
		}
		prio := podPriority(pod)
		for _, o := range w.objects {
			if other, ok := o.(*v1.Pod); ok && other != pod && other.Spec.NodeName == "" &&
				other.Status.NominatedNodeName == *e.NominatedNode && podPriority(other) < prio {
				other.Status.NominatedNodeName = ""
			}
		}
		pod.Status.NominatedNodeName = *e.NominatedNode
	}
}

func podPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// mutatePodAffinity is the API server's (pkg/registry/core/pod/strategy.go,
// MatchLabelKeysInPodAffinity): each (anti-)affinity term's matchLabelKeys and
// mismatchLabelKeys become In and NotIn requirements of its labelSelector,
// with the pod's own label values. The scheduler reads only the selector.
func mutatePodAffinity(pod *v1.Pod) {
	if pod.Spec.Affinity == nil {
		return
	}
	var terms []*v1.PodAffinityTerm
	if a := pod.Spec.Affinity.PodAffinity; a != nil {
		for i := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
		for i := range a.RequiredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
	if a := pod.Spec.Affinity.PodAntiAffinity; a != nil {
		for i := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
		for i := range a.RequiredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
	for _, term := range terms {
		if term.LabelSelector == nil {
			continue
		}
		apply := func(keys []string, op metav1.LabelSelectorOperator) {
			for _, key := range keys {
				if value, ok := pod.Labels[key]; ok {
					term.LabelSelector.MatchExpressions = append(term.LabelSelector.MatchExpressions,
						metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: []string{value}})
				}
			}
		}
		apply(term.MatchLabelKeys, metav1.LabelSelectorOpIn)
		apply(term.MismatchLabelKeys, metav1.LabelSelectorOpNotIn)
	}
}
