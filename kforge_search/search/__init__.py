"""The search's plain logic: population records, parent selection, lineages, budgets.

No Ray here (the Ray shells live in `kforge_search.actors`) and no torch: every function is
pure over frozen records, so the search's decisions are testable without a cluster.

Modules, one concept each: `population` (the `Member` record, de-duplication, islands per
platform), `selection` (elitism, tournament and rank selection, crossover pairs: verified
members only), `lineages` (which lineages to fork or retire each generation), `budget`
(limits and a tracker that says which one ran out), `lineage` (one chain of candidates),
`generation` and `engine` (the loop). Agents meet `kforge_search.agents.base.Agent`.
"""
