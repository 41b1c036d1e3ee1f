"""The Kubernetes test harness: an API server, a kubelet stand-in, cluster DNS.

Typical use in an end-to-end test (fixtures in fixtures.py; a conftest imports them)::

    def test_something(kube_api, kubeconfig, kubelet, namespace):
        kube_api.store.create("odradekclusters", namespace, {...})   # or the kubernetes client
        # run the operator: in-process kopf.operator(...) inside kubelet.resolver(), or
        # `kopf run` / `odradek-operator` with KUBECONFIG=kubeconfig (env of the child)
        wait_until(lambda: ..., "brokers ready", 120)
        kubelet.kill(f"{namespace}/demo-broker-1", signal.SIGKILL)

- apiserver.py: ``ApiServerThread`` (kmock's HTTP server, router and discovery) + kubeconfig;
- store.py: ``ObjectStore``, the objects and their semantics (what is and is not emulated);
- kubelet.py: ``KubeletStandIn``, StatefulSet controller + kubelet + DNS on local processes;
- dns.py: hosts files, the ``sitecustomize`` for child processes, ``resolver()``;
- zkshim.py: the official zookeeper image's entrypoint and ``zkServer.sh`` on Debian's ZooKeeper;
"""
