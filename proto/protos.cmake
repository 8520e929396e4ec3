# Messages and services; generated headers are included as "proto/<name>.pb.h".
# Included from the top-level CMakeLists so generated paths mirror the source tree
# ("proto/x.pb.h"): protobuf_generate names outputs relative to the current source dir.
file(GLOB PL_PROTOS ${CMAKE_SOURCE_DIR}/proto/*.proto)
add_library(pl_proto ${PL_PROTOS})
target_link_libraries(pl_proto PUBLIC protobuf::libprotobuf gRPC::grpc++)
target_include_directories(pl_proto PUBLIC $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}>)
protobuf_generate(TARGET pl_proto LANGUAGE cpp IMPORT_DIRS ${CMAKE_SOURCE_DIR}
                  PROTOC_OUT_DIR ${CMAKE_BINARY_DIR})
# Only files that declare a service get gRPC stubs.
set(PL_SERVICE_PROTOS "")
foreach(p ${PL_PROTOS})
  file(STRINGS ${p} has_service REGEX "^service ")
  if(has_service)
    list(APPEND PL_SERVICE_PROTOS ${p})
  endif()
endforeach()
if(PL_SERVICE_PROTOS)
  protobuf_generate(TARGET pl_proto LANGUAGE grpc PROTOS ${PL_SERVICE_PROTOS}
                    GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
                    PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
                    IMPORT_DIRS ${CMAKE_SOURCE_DIR} PROTOC_OUT_DIR ${CMAKE_BINARY_DIR})
endif()
