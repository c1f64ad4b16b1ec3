"""NodeResourcesFit and NodeResourcesBalancedAllocation (upstream's noderesources package).

- `fit`: does the node have room for the pod's requests (Filter), and how full would it be
  (Score with LeastAllocated, MostAllocated or RequestedToCapacityRatio).
- `balanced_allocation`: prefers nodes whose requested fractions of each resource stay even.
- `resource_allocation`: the scoring both share, per node and vectorised over the NodeTable.
- `args`: both plugins' args with upstream's defaults and validation.
"""
