"""Types of the extension module planproof._planproof (python/binding/Module.cpp)."""
from typing import List, Optional, Tuple

class Location:
    file: str
    line: int
    column: int

class Counterexample:
    element: str
    inputs: List[Tuple[str, float]]
    reference: float
    plan: float
    rank_values: List[Tuple[str, float]]

class Finding:
    kind: str
    message: str
    hint: str
    at: Location
    op: str
    value: str
    ranks: List[str]
    notes: List[str]
    counterexample: Optional[Counterexample]

class Stats:
    obligations: int
    decided_canonical: int
    solver_queries: int
    ranks: int
    reference_ops: int
    plan_ops: int
    milliseconds: float
    reused_states: int
    reused_reference: bool

class ProofRule:
    rule: str
    count: int

class Proof:
    output: str
    engine: str
    rules: List[ProofRule]

class Result:
    verdict: str
    verified: bool
    violations: List[Finding]
    warnings: List[Finding]
    inconclusive: List[Tuple[Location, str]]
    assumptions: List[str]
    stats: Stats
    proof: List[Proof]
    text: str
    json: str
    html: str
    def __bool__(self) -> bool: ...

class ReplayOutput:
    name: str
    within: bool
    max_abs_error: float
    max_rel_error: float

class ReplayResult:
    ran: bool
    failure: str
    diverged: bool
    outputs: List[ReplayOutput]
    first_op: str
    first_at: Location
    first_note: str
    seed: int

class Spec:
    name: str
    ranks: int

class Session:
    def __init__(self) -> None: ...
    def load(self, path: str, *, full_shapes: bool = False) -> Spec: ...
    def load_text(self, text: str, *, name: str = "<text>", full_shapes: bool = False) -> Spec: ...
    def load_plan(self, base: Spec, plan_text: str, *, name: str = "<candidate>") -> Spec: ...
    def edit(self, spec: Spec, edits: List[Tuple[str, str, str]]) -> List[Tuple[str, str, str]]: ...
    def verify(self, spec: Spec, *, engine: str = "auto", time_limit: float = 600.0,
               threads: int = 2, solver_budget: int = 5_000_000,
               solver_timeout_ms: Optional[int] = None,
               check_fixes: bool = True, explain_proof: bool = False) -> Result: ...
    def replay(self, spec: Spec, *, dtype: str = "fp32", order: str = "ring", seed: int = 1,
               time_limit: float = 600.0, localize: bool = True) -> ReplayResult: ...

def generate_plan(model: str, parallel: str = "") -> str: ...
