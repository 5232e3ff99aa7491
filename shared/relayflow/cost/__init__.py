"""What runs cost on AWS: the price table (:mod:`relayflow.cost.prices`), pricing a run on
either engine (:mod:`relayflow.cost.bill`), counting an execution's history
(:mod:`relayflow.cost.counts`), the static estimate of ``relayflow compile --cost``
(:mod:`relayflow.cost.estimate`) and a run item's estimate (:mod:`relayflow.cost.runs`).
See docs/cost.md."""
