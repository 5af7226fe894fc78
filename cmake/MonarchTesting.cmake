# monarch_test(NAME SOURCES ... LIBS ... [LABELS ...]): a GoogleTest executable whose tests
# ctest lists one by one.
function(monarch_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    MONARCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    MONARCH_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(props ENVIRONMENT "QT_QPA_PLATFORM=offscreen")
  if(T_LABELS)
    list(APPEND props LABELS "${T_LABELS}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
endfunction()
