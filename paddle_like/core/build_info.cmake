# Writes the header that tells every binary what it was built from (pl::cli's --version):
#
#   cmake -DOUTPUT=<build>/paddle_like/core/build_info.h -DSOURCE_DIR=<repo>
#         -DVERSION=<project version> [-DGIT_EXECUTABLE=/usr/bin/git] -P build_info.cmake
#
# Run at every build by the pl_build_info target. The file is rewritten only when its
# text changes (a new commit), so an unchanged checkout rebuilds nothing. The commit is
# "unknown" when SOURCE_DIR is not the top of a git checkout (a wheel built from an sdist,
# a source tarball, or no git).
set(commit "unknown")
if(GIT_EXECUTABLE)
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --show-toplevel HEAD
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0)
    string(REPLACE "\n" ";" lines "${out}")
    list(LENGTH lines n)
    if(n EQUAL 2)
      list(GET lines 0 toplevel)
      list(GET lines 1 sha)
      # A source tree unpacked inside some other checkout must not take that one's commit.
      file(REAL_PATH "${toplevel}" toplevel)
      file(REAL_PATH "${SOURCE_DIR}" source)
      if(toplevel STREQUAL source AND sha MATCHES "^[0-9a-f]+$")
        set(commit "${sha}")
      endif()
    endif()
  endif()
endif()

set(text "// Generated at build time by paddle_like/core/build_info.cmake; do not edit.
#define PL_PROJECT_VERSION \"${VERSION}\"
#define PL_GIT_COMMIT \"${commit}\"
#define PL_SOURCE_DIR \"${SOURCE_DIR}\"
")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
