"""Small builders for simulation tests: plain specs, no catalog (no tests here)."""

from backpressure.engine.sim.model import LlmSpec, NodeKind, NodeSpec, Rules, SimSpec
from backpressure.engine.sim.queueing import Discipline
from backpressure.engine.sim.traffic import Arrivals, SourceSpec


def server(
    name,
    parent="load",
    rps=100.0,
    discipline=Discipline.SHED,
    depth=0.0,
    max_age_s=None,
    lifo=False,
    service_s=0.001,
    resource="workers",
):
    return NodeSpec(
        name=name,
        parent=parent,
        discipline=discipline,
        servers=1,
        service_s=service_s,
        capacity_rps=rps,
        max_depth=depth,
        max_age_s=max_age_s,
        lifo=lifo,
        resource=resource,
    )


def llm_node(name, parent="load", discipline=Discipline.SHED, llm=None):
    llm = llm or LlmSpec.explicit(
        slots=18,
        prefill_tokens_per_s=5000.0,
        step_fixed_s=0.008,
        step_per_kv_token_s=1e-7,
        step_compute_per_seq_s=0.000403,
        prompt_tokens=512,
        output_tokens=256,
    )
    return NodeSpec(
        name=name,
        parent=parent,
        kind=NodeKind.LLM,
        discipline=discipline,
        servers=llm.slots,
        service_s=0.0,
        capacity_rps=0.0,
        resource="slots",
        llm=llm,
    )


def scenario(nodes, rps, duration_s=60.0, arrivals=Arrivals.DETERMINISTIC, rules=None, **shape):
    source = SourceSpec(rps=rps, arrivals=arrivals, **shape)
    return SimSpec("test", source, tuple(nodes), rules or Rules(p99_slo_ms=None), duration_s)
