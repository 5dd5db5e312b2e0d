#!/bin/sh
# The trainer: joins the Ray cluster as a node of its own (docker-compose.yml; a Ray driver runs on
# a node of its cluster), collects the demonstrations once, then runs `worldsample train` on the
# cluster, resumed from its checkpoint when the run directory already has a trainer (a restarted
# container goes on where it stopped). deploy/k8s/rayjob.yaml runs it on the Ray head instead.
#   RAY_ADDRESS    the head, HOST:PORT, or auto on a node of the cluster (required)
#   WS_JOIN_CLUSTER  1 (default): start a Ray node here first; 0: this is a node already
#   WS_RUN         run directory on the shared volume (default /runs/main)
#   WS_ROBOT       bridge: learn from what the bridge commits; sim: the simulated arm in lock-step
#   WS_DEMOS       demonstrations for a new run (default 20)
#   WS_TRAIN_ARGS  more options for `worldsample train`, e.g. --place world_model=wm_node --set loop.real_steps=20000
set -eu
run="${WS_RUN:-/runs/main}"
address="${RAY_ADDRESS:?set RAY_ADDRESS to the Ray head, HOST:PORT}"
if [ "${WS_JOIN_CLUSTER:-1}" = 1 ]; then
    # the parts that are not placed elsewhere run on this node, beside the driver
    ray start --address="$address" --num-cpus="${WS_TRAINER_CPUS:-2}" --disable-usage-stats
fi
if [ ! -e "$run/store/demo/zarr.json" ]; then
    worldsample demos collect --out "$run" --episodes "${WS_DEMOS:-20}"
fi
resume=""
if [ -d "$run/trainer" ]; then
    resume="--resume"
fi
# WS_TRAIN_ARGS is a list of options: split on purpose
# shellcheck disable=SC2086
exec worldsample train "$run" --address "$address" --robot "${WS_ROBOT:-bridge}" $resume ${WS_TRAIN_ARGS:-}
