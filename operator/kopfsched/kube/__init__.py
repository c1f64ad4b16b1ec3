"""The kube layer: kopf watch handlers and the kubernetes-asyncio ClusterClient.

The only code that imports kopf or kubernetes_asyncio."""
