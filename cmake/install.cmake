# `cmake --install <build> [--prefix P]`: the C++ library of model authors as the
# package paddle_like (find_package(paddle_like) -> paddle_like::paddle_like), its
# headers (with the generated proto headers they include) and the command-line tools.
# tests/install builds a small outside project against an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PL_EXPORTED_LIBRARIES pl_core pl_io pl_nn pl_optim pl_data pl_proto)
add_library(paddle_like INTERFACE)
add_library(paddle_like::paddle_like ALIAS paddle_like)
target_link_libraries(paddle_like INTERFACE ${PL_EXPORTED_LIBRARIES})
target_include_directories(paddle_like INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS paddle_like ${PL_EXPORTED_LIBRARIES} EXPORT paddle_likeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY paddle_like/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/paddle_like COMPONENT dev
        FILES_MATCHING PATTERN "*.h"
        PATTERN "testing" EXCLUDE)
install(DIRECTORY ${CMAKE_BINARY_DIR}/proto/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/proto COMPONENT dev
        FILES_MATCHING PATTERN "*.pb.h")
install(EXPORT paddle_likeTargets NAMESPACE paddle_like:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/paddle_like
        COMPONENT dev)
configure_package_config_file(cmake/paddle_likeConfig.cmake.in ${CMAKE_BINARY_DIR}/paddle_likeConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/paddle_like)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/paddle_likeConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/paddle_likeConfig.cmake ${CMAKE_BINARY_DIR}/paddle_likeConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/paddle_like COMPONENT dev)
install(TARGETS pl-trainer pl-master pl-pserver pl-launch pl-status pl-convert
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
