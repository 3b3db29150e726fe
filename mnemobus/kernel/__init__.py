"""Assembly: the roles, the processes that run them, the extension surface (`hooks`, `extensions`) and
what builds the engine from config (`backends`). Imports every layer below it; `api/` and `cli/` build on it."""
