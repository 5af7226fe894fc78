# monarch_feature(NAME "description" "debian packages" [OUTSIDE_DEBIAN])
#   Declares MONARCH_WITH_<NAME> as AUTO (default), ON or OFF. After the probe,
#   monarch_feature_found(NAME found) sets MONARCH_WITH_<NAME> to ON/OFF, and fails configure
#   when the feature was asked for explicitly (ON) but is missing, naming the packages.
#   OUTSIDE_DEBIAN: its dependencies do not come from Debian (the CUDA toolkit), so a Debian 12
#   machine with tools/install_deps.sh run need not build it; every other part it must build.
set(MONARCH_FEATURES "")
set(MONARCH_FEATURES_FROM_DEBIAN "")
# The configure summary as a file, one feature a line: NAME;ON|OFF;description;packages.
# tests/features_test reads it (cmake/MonarchCheckFeatures.cmake).
set(MONARCH_FEATURES_FILE ${PROJECT_BINARY_DIR}/monarch_features.txt)

# monarch_require(PACKAGE "debian packages" [find_package arguments...]): find_package for a
# dependency every build needs; when it is missing, configure fails naming the packages.
macro(monarch_require package packages)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    string(STRIP "${package} ${ARGN}" _monarch_wanted)
    message(FATAL_ERROR "${_monarch_wanted} was not found. Install: ${packages} (tools/install_deps.sh does it).")
  endif()
endmacro()

function(monarch_feature name description packages)
  cmake_parse_arguments(F "OUTSIDE_DEBIAN" "" "" ${ARGN})
  if(NOT F_OUTSIDE_DEBIAN)
    set(MONARCH_FEATURES_FROM_DEBIAN ${MONARCH_FEATURES_FROM_DEBIAN} ${name} PARENT_SCOPE)
  endif()
  set(MONARCH_WITH_${name} AUTO CACHE STRING "${description}: AUTO, ON or OFF")
  set_property(CACHE MONARCH_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  set(MONARCH_${name}_DESCRIPTION "${description}" PARENT_SCOPE)
  set(MONARCH_${name}_PACKAGES "${packages}" PARENT_SCOPE)
  set(MONARCH_${name}_WANTED "${MONARCH_WITH_${name}}" PARENT_SCOPE)
  if(MONARCH_WITH_${name} STREQUAL "OFF")
    set(MONARCH_WITH_${name}_REQUESTED FALSE PARENT_SCOPE)
  else()
    set(MONARCH_WITH_${name}_REQUESTED TRUE PARENT_SCOPE)
  endif()
  set(MONARCH_WITH_${name} OFF PARENT_SCOPE)
  set(MONARCH_FEATURES ${MONARCH_FEATURES} ${name} PARENT_SCOPE)
endfunction()

function(monarch_feature_found name found)
  if(found)
    set(MONARCH_WITH_${name} ON PARENT_SCOPE)
  elseif(MONARCH_${name}_WANTED STREQUAL "ON")
    message(FATAL_ERROR "MONARCH_WITH_${name}=ON but ${MONARCH_${name}_DESCRIPTION} was not found. "
                        "Install: ${MONARCH_${name}_PACKAGES} (tools/install_deps.sh does it).")
  endif()
endfunction()

# monarch_write_features(FILE [MISSING NAME...]): writes the configure summary to FILE in the
# format of MONARCH_FEATURES_FILE; the features named after MISSING are written OFF (what a
# build without them would write: the features test checks that the check fails on it).
function(monarch_write_features file)
  cmake_parse_arguments(W "" "" "MISSING" ${ARGN})
  set(text "")
  foreach(name ${MONARCH_FEATURES})
    if(MONARCH_WITH_${name} AND NOT name IN_LIST W_MISSING)
      set(state ON)
    else()
      set(state OFF)
    endif()
    string(APPEND text "${name};${state};${MONARCH_${name}_DESCRIPTION};${MONARCH_${name}_PACKAGES}\n")
  endforeach()
  file(WRITE ${file} "${text}")
endfunction()

# Prints which optional parts this build has and writes the same summary to
# MONARCH_FEATURES_FILE.
function(monarch_print_features)
  message(STATUS "")
  message(STATUS "monarch-sim features:")
  foreach(name ${MONARCH_FEATURES})
    if(MONARCH_WITH_${name})
      set(state "ON ")
    else()
      set(state "OFF")
    endif()
    message(STATUS "  ${state} ${MONARCH_${name}_DESCRIPTION}  (MONARCH_WITH_${name}=${MONARCH_${name}_WANTED})")
  endforeach()
  message(STATUS "")
  monarch_write_features(${MONARCH_FEATURES_FILE})
endfunction()
