"""Users' type checkers see a job's payload fields as its constructor (PEP 681 dataclass_transform)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

SAMPLE = '''
from jobbridge import Job, JobContext, job


class SendInvoice(Job, name="billing.invoice", queue="billing", tries=5):
    invoice_id: int
    note: str = ""

    def handle(self, ctx: JobContext) -> None: ...


@job("blog.notify", queue="mail")
class Notify:
    post_id: int

    def handle(self, ctx: JobContext) -> None: ...


ok = [SendInvoice(invoice_id=1), SendInvoice(1, note="x"), Notify(post_id=2)]
bad = SendInvoice(invoice_id="seven")
'''


def test_mypy_checks_job_constructors(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    sample = root / f"_typing_sample_{tmp_path.name}.py"  # inside the project, where jobbridge's types resolve
    sample.write_text(SAMPLE)
    try:
        out, _, status = api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path), str(sample)])
    finally:
        sample.unlink()
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out
    assert "invoice_id" in errors[0] and 'expected "int"' in errors[0]
    assert status == 1
