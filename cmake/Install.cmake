# install(): libtraintime.so, traintime-report when built, the annotation headers and Python
# package (annotate/CMakeLists.txt), and the package files that let users' builds find the
# header: traintimeConfig.cmake (find_package) and traintime.pc (pkg-config).
include(CMakePackageConfigHelpers)

install(TARGETS traintime LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET traintime-report)
  install(TARGETS traintime-report RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(TRAINTIME_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/traintime)
install(EXPORT traintimeTargets NAMESPACE traintime:: DESTINATION ${TRAINTIME_CMAKE_DIR})
set(TRAINTIME_INSTALL_PRELOAD ${CMAKE_INSTALL_LIBDIR}/libtraintime.so)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/traintimeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/traintimeConfig.cmake
  INSTALL_DESTINATION ${TRAINTIME_CMAKE_DIR}
  PATH_VARS TRAINTIME_INSTALL_PRELOAD)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/traintimeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_BINARY_DIR}/traintimeConfig.cmake ${CMAKE_BINARY_DIR}/traintimeConfigVersion.cmake
        DESTINATION ${TRAINTIME_CMAKE_DIR})

if(CMAKE_DL_LIBS)
  set(TRAINTIME_PC_LIBS "-l${CMAKE_DL_LIBS}")
else()
  set(TRAINTIME_PC_LIBS "")
endif()
# From <libdir>/pkgconfig back up to the prefix ("../..", or "../../.." for lib/<multiarch>).
file(RELATIVE_PATH TRAINTIME_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" TRAINTIME_PC_UP "${TRAINTIME_PC_UP}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/traintime.pc.in ${CMAKE_BINARY_DIR}/traintime.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/traintime.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
