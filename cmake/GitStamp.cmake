# Writes OUT, a C++ source holding the revision the benchmark library is built from, at every
# build (the pipelink_git_stamp target runs it), and rewrites it only when the revision changed,
# so that a build with no new commit recompiles nothing.
# Why at build time: a configure-time value went stale with every commit, and a revision asked of
# git at run time named the tree as it is now, not the one the binary was built from (a binary
# built at one commit and run after a checkout was labelled with the new one).
# FIXED: a revision given at configure (-DPIPELINK_GIT_REVISION=...): the GPU machine's copy of the
# tree has no current .git, so scripts/gpu-check.sh passes the one it was told.
if(NOT "${FIXED}" STREQUAL "")  # a revision CMake reads as false ("0", "N") is still one
  set(rev "${FIXED}")
else()
  execute_process(COMMAND git describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR "${rev}" STREQUAL "")
    set(rev unknown)
  endif()
endif()
# Only characters a revision has: the value lands in a C++ string literal.
string(REGEX REPLACE "[^A-Za-z0-9._+-]" "_" rev "${rev}")
string(CONCAT text "// Generated at build time by cmake/GitStamp.cmake: the revision this library was built from.\n"
       "#include \"measure.hpp\"  // its declaration: a change of type on either side fails to compile\n"
       "namespace pipelink::bench {\n"
       "const char* const kBuildRevision = \"${rev}\";\n}  // namespace pipelink::bench\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
