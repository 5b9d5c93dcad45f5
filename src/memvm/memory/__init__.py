"""Pure memory core: block rules, prompt compiler, memory metadata. No I/O."""
