"""A Kubernetes API emulator on 127.0.0.1, built on kmock.

The end-to-end tests and `kopfsched sandbox` run the real operator against it: one emulator, so
what the tests prove is what a sandbox user sees. `server` holds the emulator, `resources` the kinds
it serves, `patches` and `selectors` the API semantics it implements.
"""
