#!/usr/bin/env bash
echo "make demo: not yet (the daemon, issue 3, brings it)"
