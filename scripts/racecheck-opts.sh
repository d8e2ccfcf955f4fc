# Sourced by scripts/racecheck-pieces.sh and scripts/gpu-check.sh: sanitizer options with each
# @FILE word replaced by FILE's options (its lines but blank ones and # comments), e.g.
# @scripts/racecheck-no-shared.txt (the kernels without shared memory left out). Prints them on
# one line; fails, naming the file on stderr, where an @FILE cannot be read (a racecheck without
# its options would check something else than asked).
racecheck_expand_opts() {
  local o
  for o in "$@"; do
    if [[ $o == @* ]]; then
      [ -r "${o#@}" ] || { echo "no option file ${o#@}" >&2; return 1; }
      grep -vE '^[[:space:]]*(#|$)' "${o#@}" | tr '\n' ' '
    else
      printf '%s ' "$o"
    fi
  done
}
