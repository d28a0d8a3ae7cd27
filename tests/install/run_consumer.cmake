# cmake -DBUILD_DIR=<caudal build> -DWORK_DIR=<scratch> -DCONSUMER_DIR=<tests/install/consumer>
#       -DGENERATOR=<generator> -DCXX=<compiler> [-DLAUNCHER=<ccache>] [-DSANITIZE=<list>]
#       -DVERSION=<caudal version> -DLIBRARIES=<a|b|...> -P run_consumer.cmake
# Installs the build into WORK_DIR/prefix, builds the consumer project against that prefix alone,
# runs it and checks its decisions (on the memory store and on a redis-server of its own), and
# runs the installed `caudal --version`.
cmake_minimum_required(VERSION 3.25)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

set(flags "")
if(SANITIZE)  # the installed libraries are instrumented: so must the program be
  set(flags "-fsanitize=${SANITIZE} -fno-omit-frame-pointer")
endif()
run("configuring the consumer"
    ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}
    -DCMAKE_CXX_FLAGS=${flags} -DCMAKE_EXE_LINKER_FLAGS=${flags}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCAUDAL_EXPECTED_VERSION=${VERSION} -DCAUDAL_EXPECTED_LIBRARIES=${LIBRARIES})
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

# A redis-server of the test's own on a free loopback port, for the consumer's RedisStore.
execute_process(COMMAND python3 -c
  "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
  OUTPUT_VARIABLE port OUTPUT_STRIP_TRAILING_WHITESPACE)
run("starting redis-server" redis-server --port ${port} --bind 127.0.0.1 --daemonize yes
    --save "" --appendonly no --dir ${WORK_DIR} --pidfile ${WORK_DIR}/redis.pid
    --logfile ${WORK_DIR}/redis.log)
execute_process(COMMAND timeout 10 sh -c
                "until redis-cli -p ${port} ping >/dev/null 2>&1
                 do sleep 0.01
                 done"  # lines, not ';', which would split the argument
                RESULT_VARIABLE up)
set(rc 1)
if(up EQUAL 0)
  execute_process(COMMAND ${WORK_DIR}/build/consumer redis://127.0.0.1:${port}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE err)
endif()
# Stopped whatever happened: the server is a daemon, which would outlive the test.
execute_process(COMMAND redis-cli -p ${port} shutdown nosave OUTPUT_QUIET ERROR_QUIET)
if(NOT up EQUAL 0)
  file(READ ${WORK_DIR}/redis.log log)
  message(FATAL_ERROR "redis-server did not answer on port ${port} within 10 s:\n${log}")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "running the consumer failed (${rc}):\n${output}\n${err}")
endif()
set(expected "memory token_bucket allowed remaining=1 retry_after_s=0\n"
             "memory token_bucket allowed remaining=0 retry_after_s=0\n"
             "memory token_bucket denied remaining=0 retry_after_s=3600\n"
             "redis token_bucket allowed remaining=1 retry_after_s=0\n"
             "redis token_bucket allowed remaining=0 retry_after_s=0\n"
             "redis token_bucket denied remaining=0 retry_after_s=3600\n")
string(JOIN "" expected ${expected})
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "the consumer printed:\n${output}\nexpected:\n${expected}")
endif()

run("the installed caudal" ${prefix}/bin/caudal --version)
if(NOT output MATCHES "${VERSION}")
  message(FATAL_ERROR "installed `caudal --version` printed: ${output}")
endif()

file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "installed package: ${LIBRARIES}; the consumer decided:\n${expected}")
