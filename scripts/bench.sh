#!/usr/bin/env bash
echo "make bench: not yet (the daemon, issue 3, brings it)"
