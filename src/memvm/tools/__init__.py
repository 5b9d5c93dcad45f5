"""The tool catalog: built-in tool specs, tool rows, and which tools each agent has."""
