# build_commit.cmake: writes OUT, a C header defining TS_BUILD_COMMIT as the source tree's
# git commit (COMMIT when given, for a tree without .git; "unknown" when neither), and
# only when the text changes, so a new commit recompiles src/common/build_info.c alone.
# cmake -DSRC=DIR -DOUT=FILE [-DCOMMIT=ID] -P build_commit.cmake
if(COMMIT)
  set(commit "${COMMIT}")
else()
  execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT commit MATCHES "^[0-9a-f]+$")
    set(commit unknown)
  endif()
endif()
string(REGEX REPLACE "[^0-9A-Za-z._+-]" "_" commit "${commit}")
set(text "#define TS_BUILD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
