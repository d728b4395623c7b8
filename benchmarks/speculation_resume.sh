#!/usr/bin/env bash
# A speculating sweep (fig1_linear quick, the accelerator's plan forced on a CPU: one program) stopped by
# SIGTERM, resumed, killed -9, resumed again, then compared with an undisturbed run in /tmp/acc/spec2
# (benchmarks/RESULTS_search_latency.md, "Measured in the driver"). Output: /tmp/acc/term.out.
set -u
cd "$(dirname "$0")/.." && . .venv/bin/activate
SETS=(--set 'seeds=[0]' --set 'train.learning_rates=[10.0]' --set 'engine.pad_to_max=["d"]' --set engine.search_pad_floor=1.0 --set engine.max_slots=32 --set engine.segment_steps=256 --set engine.speculation=2)
rm -rf /tmp/acc/term; : > /tmp/acc/term.out
jaxmem run fig1_linear --preset quick "${SETS[@]}" --out /tmp/acc/term > /tmp/acc/term1.log 2>&1 &
pid=$!
sleep 14; kill -TERM $pid; wait $pid; echo "first rc $?" >> /tmp/acc/term.out
jaxmem status /tmp/acc/term >> /tmp/acc/term.out
jaxmem run fig1_linear --preset quick "${SETS[@]}" --out /tmp/acc/term > /tmp/acc/term2.log 2>&1 &
pid=$!
sleep 9; kill -9 $pid; wait $pid; echo "second rc $?" >> /tmp/acc/term.out
jaxmem run fig1_linear --preset quick "${SETS[@]}" --out /tmp/acc/term > /tmp/acc/term3.log 2>&1; echo "third rc $?" >> /tmp/acc/term.out
jaxmem compare /tmp/acc/spec2 /tmp/acc/term >> /tmp/acc/term.out 2>&1
echo done >> /tmp/acc/term.out
