"""A Kubernetes API emulator on 127.0.0.1, built on kmock.

The end-to-end tests and `kopfsched sandbox` run the real operator against it: one emulator, so
what the tests prove is what a sandbox user sees. It ships in the `sandbox` extra (kmock), never
in a cluster installation.

The emulator is one class built in layers, one module per job, each on the one before:

- `store`: objects, resourceVersions, watch history and the event fan-out (`EmulatorStore`);
- `list_watch`: GET, LIST with selectors and continue tokens, WATCH streams (`EmulatorReads`);
- `verbs`: create, update, patch, delete, subresources, binding, graceful deletion, CRD pruning
  and validation, managedFields (`EmulatorWrites`);
- `faults`: the test hooks that inject failures, throttling, compaction, broken watches
  (`EmulatorFaults`);
- `server`: `FastKubernetesEmulator` itself: the HTTP entry point, routing, discovery, and its
  hosting (in a loop, a thread, a subprocess).

Beside them: `resources` the kinds it serves, `patches` and `selectors` the API semantics it
implements, `namespaces` their lifecycle (Terminating, NamespaceLifecycle admission),
`authorization` RBAC when it is switched on, `tables` and `openapi` what kubectl reads,
`validation` and `event_validation`.
"""
