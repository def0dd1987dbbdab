"""What a search did and where its time went: `query --explain` and the API's `"explain": true`.

As PostgreSQL's EXPLAIN ANALYZE shows a plan with the time of each node: the index
structure and the parameters the search ran with, the segments searched, the candidates
taken from them and rescored, a filter's selectivity and the strategy chosen for it, then
each stage's seconds (encode, filter, vector search, rescore, lexical, fusion, metadata).
The stages are timed by the phase timer that says where a build's time goes
(`semsearch.phases`); the searcher, the snapshot and the rescoring note the facts on it.
"""

from __future__ import annotations

from typing import Any

from semsearch.phases import PhaseTimer
from semsearch.search.snapshot import IndexSnapshot

# Facts the readable block shows on lines of their own; the others follow as they are.
SHOWN = ("params", "filter", "segments_searched", "candidates", "rescored", "fusion")


def explanation(
    snapshot: IndexSnapshot, mode: str, k: int, queries: int, timer: PhaseTimer | None
) -> dict[str, Any]:
    """The plan of one search call and its stages' seconds, as JSON-ready data."""
    manifest = snapshot.manifest
    report = timer.report() if timer is not None else None
    facts = dict(report.facts) if report is not None else {}
    plan: dict[str, Any] = {
        "mode": mode,
        "k": k,
        "queries": queries,
        "index": {
            "name": manifest.name,
            "generation": manifest.generation,
            "structure": manifest.index.factory,
            "metric": manifest.index.metric,
            "rows": snapshot.live_rows,
            "segments": len(snapshot.segments),
        },
    }
    if mode != "lexical":
        exact = facts.get("filter", {}).get("strategy", "").startswith("exact")
        params = {} if exact else facts.pop("params", dict(manifest.index.search_params))
        plan["search_params"] = params
    facts.pop("params", None)
    if facts.get("depths_ranked") == 1:  # deeper only where grouping by document needed it
        del facts["depths_ranked"]
    plan.update(facts)
    if report is not None:
        stages = report.to_dict(digits=6)
        stages.pop("facts", None)
        plan["time"] = stages
    return plan


def explain_lines(plan: dict[str, Any]) -> list[str]:
    """The plan for a person: one line each for the plan, its parameters, the filter, the
    candidates and the time of each stage."""
    index = plan["index"]
    queries = plan["queries"]
    lines = [
        f"plan: {plan['mode']} search, k {plan['k']}, {queries} quer{'y' if queries == 1 else 'ies'}"
        f"; index {index['name']} (generation {index['generation']}): {index['structure']}, "
        f"{index['metric']}, {index['rows']:,} rows in {index['segments']} segment(s)"
    ]
    if "search_params" in plan:
        params = plan["search_params"]
        shown = ", ".join(f"{name} {value}" for name, value in params.items())
        lines.append(f"parameters: {shown or 'none (exact search)'}")
    if "filter" in plan:
        kept = plan["filter"]
        lines.append(
            f"filter: {kept['where']} keeps {kept['matches']:,} of {index['rows']:,} rows "
            f"({100 * kept['selectivity']:.3g} %): {kept['strategy']}"
        )
    if "candidates" in plan:
        searched = plan.get("segments_searched")
        taken = f"taken from {searched} segment(s)" if searched else "scored exactly"
        rescored = plan.get("rescored")
        again = f"; {rescored:,} rescored from their stored vectors" if rescored else ""
        lines.append(f"candidates: {plan['candidates']:,} {taken}{again}")
    if "fusion" in plan:
        fusion = plan["fusion"]
        lines.append(
            f"fusion: {fusion['method']}, {fusion['candidates_per_side']:,} candidates a side"
        )
    others = {
        name: value
        for name, value in plan.items()
        if name not in (*SHOWN, "mode", "k", "queries", "index", "search_params", "time")
    }
    lines.extend(f"{name.replace('_', ' ')}: {value}" for name, value in others.items())
    if "time" in plan:
        lines.append("time: " + _stages(plan["time"]))
    return lines


def _stages(time: dict[str, Any]) -> str:
    stages = ", ".join(f"{name} {_ms(seconds)}" for name, seconds in time["phases"].items())
    overlap = f" ({_ms(time['overlapped_s'])} overlapped)" if time["overlapped_s"] else ""
    return f"{stages or 'no stage'}{overlap}; other {_ms(time['other_s'])}; total {_ms(time['wall_s'])}"


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.2f} ms"
