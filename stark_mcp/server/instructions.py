"""The text a host reads when it connects: how to drive a STARK search with the tools."""

INSTRUCTIONS = """\
stark-mcp makes a PyTorch module faster by searching over custom kernels that YOU write, and proves
every speedup with a trusted evaluator (correctness against the reference on fresh inputs, then
timing against eager and torch.compile). Runtimes are only ever measured by this server.

The loop (STARK: plan / code / debug roles over a tree of attempts):
1. create_run(problem=<path to a .py file in the server's folders>) -> run_id, root_node_id, baselines.
   The problem defines class Model(nn.Module), get_inputs() and get_init_inputs(). For the user's
   own module or function, make that file first with create_problem(target='package.module:Name',
   project_root=..., init_args=..., inputs=..., shapes=...); the prompt optimize_module walks
   through the whole flow.
2. Repeat until the budget is used (add_child reports attempts_left):
   a. select_node(run_id) -> node_id and action ('plan' or 'debug').
   b. action 'plan': build_context(run_id, node_id, role='plan') and answer that prompt with a plan:
      advice plus the node's full source with the code to change wrapped in
      '# <<<IMPROVE BEGIN>>>' / '# <<<IMPROVE END>>>' lines. Then
      build_context(run_id, node_id, role='code', plan=<your plan>) and answer with the complete
      new source defining class ModelNew. Record it: add_child(run_id, parent_id=node_id,
      source=<source>, plan=<plan>, action='plan').
   c. action 'debug': build_context(run_id, node_id, role='debug'), write the repaired source, then
      add_child(run_id, parent_id=node_id, source=<source>, action='debug').
   Optional: evaluate_kernel(run_id, source) tries a source without recording it; pass its
   evaluation_id to add_child with the same source to record that result without re-running it.
3. leaderboard(run_id) for the fastest correct nodes, export_kernel(run_id) for a runnable file
   (for a problem made by create_problem: a drop-in module for the user's package).

Keep several attempts in flight when your client runs MCP tasks (io.modelcontextprotocol/tasks;
Claude Code does): create_run, evaluate_kernel, add_child, profile_kernel, optimize and
create_problem then return a task at once, its statusMessage says what it is doing
("child of n3: build 18 s", then "n7 passed, 2.41x; 12/30 attempts"), and it ends with the tool's
result. Pipeline: submit add_child, then call select_node and write the next attempt while the last
one builds; keep up to 3 going. select_node steers off attempts in flight (no node is repaired
twice at once), and attempts in flight count against the budget, so add_child refuses one more
than it allows. Without tasks each call blocks, reporting progress, and the loop above is serial.
A task that needs the user (optimize on a spent budget, create_problem over an existing file) asks
through input_required.

Also: list_runs, get_node, and optimize(run_id, budget) which runs the whole loop inside the server
when it has an LLM API key. On a GPU every passing attempt is profiled per kernel just after
add_child returns (get_node shows it once kept; build_context waits for it, and the plan prompt
shows the table); profile_kernel(run_id, node_id) profiles one node on demand. Prompts
plan/code/debug render the same text as build_context.
Resources: stark://runs, stark://runs/{run_id}/tree, stark://runs/{run_id}/nodes/{node_id}/source,
stark://runs/{run_id}/nodes/{node_id}/logs, stark://runs/{run_id}/best.
"""
