"""Addresses that cannot work (issue 16, classes 2 and 3): each rule refuses one mistake with one exact line.

Each test starts from the smallest site (small_site.py): clusters storage, compute and gpu with node ranges
10.30.1-3.0/24, pod ranges 10.90-92.0.0/16 and internal pools 10.30.101-103.0/27."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import parse_site
from helpers import config_errors
from small_site import small_site


def gpu_site(**settings: object) -> dict:
    raw = small_site()
    raw["clusters"]["gpu"].update(settings)
    return raw


def test_fails_when_a_range_has_no_mask():
    assert config_errors(gpu_site(pod_cidr="10.92.0.0")) == [
        "fab-platform:site.clusters.gpu.pod_cidr: has no mask: write the range with its prefix length, such as 10.92.0.0/24 "
        "(a bare address is not a range) (got '10.92.0.0')"
    ]


def test_fails_when_a_range_overlaps_loopback():
    assert config_errors(gpu_site(node_cidr="127.0.3.0/24")) == [
        "fab-platform:site.clusters.gpu.node_cidr: overlaps the loopback range 127.0.0.0/8; use a routable range such as "
        "10.64.0.0/16 (got '127.0.3.0/24')"
    ]


def test_fails_when_a_pod_range_holds_fewer_node_ranges_than_the_node_range_holds_nodes():
    assert config_errors(gpu_site(pod_cidr="10.92.0.0/17")) == [
        "fab-platform:site.clusters.gpu.pod_cidr: 10.92.0.0/17 holds 128 node pod ranges (a /24 per node, Cilium's "
        "cluster-pool IPAM) but clusters.gpu.node_cidr 10.30.3.0/24 holds up to 254 nodes; use a /16 or larger"
    ]


def test_fails_when_a_pod_range_is_smaller_than_one_node_range():
    assert config_errors(gpu_site(pod_cidr="10.92.0.0/25")) == [
        "fab-platform:site.clusters.gpu.pod_cidr: 10.92.0.0/25 is smaller than one node's pod range: Cilium gives each node "
        "a /24 of it; use a /16 or larger"
    ]


@settings(max_examples=60, deadline=None)
@given(st.integers(8, 24), st.integers(24, 30))
def test_a_pod_range_is_accepted_exactly_when_it_has_a_node_range_per_node_address(pod_prefix, node_prefix):
    raw = gpu_site(pod_cidr=f"11.0.0.0/{pod_prefix}", node_cidr=f"10.30.3.0/{node_prefix}", api_server="10.30.3.2",
                   bgp_peers={"tor": {"address": "10.30.3.1", "asn": 65300}})
    hosts = 2 ** (32 - node_prefix) - 2
    fits = 2 ** (24 - pod_prefix) >= hosts
    try:
        parse_site(raw)
    except Exception as exc:  # noqa: BLE001 (the assertion says which)
        assert not fits, exc
        assert "pod_cidr" in str(exc)
    else:
        assert fits


def test_fails_when_a_host_address_is_multicast():
    assert config_errors(gpu_site(api_server="224.0.0.18")) == [
        "fab-platform:site.clusters.gpu.api_server: is in the multicast range 224.0.0.0/4; give the address of one host on "
        "the site's network (got '224.0.0.18')"
    ]


def test_fails_when_a_host_address_is_written_with_a_mask():
    assert config_errors(gpu_site(api_server="10.30.3.10/24")) == [
        "fab-platform:site.clusters.gpu.api_server: must be an IPv4 address without a mask, such as 10.0.0.1 (got '10.30.3.10/24')"
    ]


def test_fails_when_an_api_server_is_inside_a_pod_range():
    assert config_errors(gpu_site(api_server="10.91.0.10")) == [
        "fab-platform:site.clusters.gpu.api_server: 10.91.0.10 is inside clusters.compute.pod_cidr (10.91.0.0/16); an API "
        "server's address is never in a pod range, a LoadBalancer pool or another cluster's node range"
    ]


def test_fails_when_two_clusters_share_an_api_server():
    raw = gpu_site(api_server="10.30.250.10")
    raw["clusters"]["compute"]["api_server"] = "10.30.250.10"
    assert config_errors(raw) == [
        "fab-platform:site.clusters.gpu.api_server: 10.30.250.10 is already the api_server of clusters.compute; every "
        "cluster has its own API server address"
    ]


def test_fails_when_an_api_server_is_the_broadcast_address_of_its_node_range():
    assert config_errors(gpu_site(api_server="10.30.3.255")) == [
        "fab-platform:site.clusters.gpu.api_server: 10.30.3.255 is the broadcast address of clusters.gpu.node_cidr "
        "(10.30.3.0/24); give a host address"
    ]


def test_fails_when_a_bgp_peer_is_off_the_node_network():
    assert config_errors(gpu_site(bgp_peers={"tor": {"address": "10.30.9.1", "asn": 65300}})) == [
        "fab-platform:site.clusters.gpu.bgp_peers.tor.address: 10.30.9.1 is not in clusters.gpu.node_cidr (10.30.3.0/24): "
        "Cilium peers over single-hop eBGP, so the peer is a router on the nodes' network"
    ]


def test_fails_when_a_bgp_peer_is_inside_the_clusters_own_pool():
    assert config_errors(gpu_site(bgp_peers={"tor": {"address": "10.30.103.1", "asn": 65300}})) == [
        "fab-platform:site.clusters.gpu.bgp_peers.tor.address: 10.30.103.1 is inside clusters.gpu.lb_pools.internal.cidrs[0] "
        "(10.30.103.0/27); a BGP peer is a router on clusters.gpu.node_cidr (10.30.3.0/24), never a pod, a VIP or another "
        "cluster's node"
    ]


def test_fails_when_a_bgp_peer_is_the_api_server():
    assert config_errors(gpu_site(bgp_peers={"tor": {"address": "10.30.3.10", "asn": 65300}})) == [
        "fab-platform:site.clusters.gpu.bgp_peers.tor.address: 10.30.3.10 is the api_server of clusters.gpu; a BGP peer is a "
        "router, not the API server"
    ]


def test_fails_when_two_bgp_peers_share_an_address():
    raw = gpu_site()
    raw["clusters"]["gpu"]["bgp_peers"]["tor-b"] = {"address": "10.30.3.1", "asn": 65300}
    assert config_errors(raw) == [
        "fab-platform:site.clusters.gpu.bgp_peers.tor-b.address: 10.30.3.1 is already the address of peer 'tor'; each peer is "
        "another router"
    ]


def test_fails_when_a_vip_is_the_network_address_of_its_pool_block():
    raw = small_site()
    raw["inference"]["gateway"]["vip"] = "10.30.103.0"
    assert config_errors(raw) == [
        "fab-platform:site.inference.gateway.vip: 10.30.103.0 is the network address of the pool block 10.30.103.0/27, which "
        "routers drop or broadcast; pick a host address of it"
    ]


def test_a_single_address_pool_block_holds_its_vip():
    raw = small_site()
    raw["clusters"]["gpu"]["lb_pools"]["gateway"] = {"cidrs": ["10.30.104.7/32"]}
    raw["inference"]["gateway"].update(pool="gateway", vip="10.30.104.7")
    assert str(parse_site(raw).inference.gateway.vip) == "10.30.104.7"
