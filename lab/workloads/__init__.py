"""The lab's workloads: xlat-perf (RFC 8219 throughput, frame loss, latency, PDV;
stateful new-flow rate and sessions scale), iperf3 TCP, ping RTT, HTTP
transactions, and the DUT's CPU use during each (:mod:`lab.workloads.cpu`)."""
