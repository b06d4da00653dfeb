"""xlat lab: network-namespace topologies, shared by the tests and the bench/demo tools."""
