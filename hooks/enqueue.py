"""Hook shim for Stop, UserPromptSubmit, PreCompact, SessionEnd and SubagentStop (see enqueue_hook).

Claude Code runs `<python> -I -S enqueue.py [EVENT]` on every prompt. Python compiles a script it
runs on every start but caches the bytecode of a module it imports, so the work is in the sibling
module enqueue_hook (-I leaves this folder off sys.path, hence the insert). Standard library only;
exits 0 on every path.
"""

import os
import sys

if __name__ == "__main__":
    # The one boundary: whatever happens (a missing sibling, bad input, full disk, Ctrl-C), exit 0
    # silently, so Claude Code neither blocks the user nor shows a hook error.
    try:
        sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
        import enqueue_hook

        enqueue_hook.main(sys.argv)
    except BaseException:
        pass
    sys.exit(0)
