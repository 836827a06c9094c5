# Tests are discovered, not listed: tests/c/test_<module>.c becomes a ctest
# named c/<module>; tests/lua/<topic>_test.lua runs as
# `mkengine script tests/lua/<topic>_test.lua` and is named lua/<topic>.
file(GLOB MK_C_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/c/test_*.c)
foreach(src ${MK_C_TESTS})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^test_" "" mod ${name})
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE mkcore)
  add_test(NAME c/${mod} COMMAND ${name})
  set_tests_properties(c/${mod} PROPERTIES TIMEOUT 300
    ENVIRONMENT "MKENGINE_HOME=${CMAKE_SOURCE_DIR};MKENGINE_BUILD=${CMAKE_BINARY_DIR}")
endforeach()

if(NOT MK_SANITIZE)
  file(GLOB MK_LUA_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/lua/*_test.lua)
  foreach(src ${MK_LUA_TESTS})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "_test$" "" topic ${name})
    add_test(NAME lua/${topic} COMMAND mkengine script ${src})
    set_tests_properties(lua/${topic} PROPERTIES TIMEOUT 600
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
      # frozen suites and baselines cached by runs stay in the build tree
      ENVIRONMENT "MKENGINE_HOME=${CMAKE_SOURCE_DIR};MKENGINE_BUILD=${CMAKE_BINARY_DIR};MKENGINE_CACHE=${CMAKE_BINARY_DIR}/test-cache")
  endforeach()
endif()

# Pages in a real browser: tests/browser/test_<page>.py (Debian's chromium,
# chromium-driver and python3-selenium, scripts/packages/ui.txt), named
# browser/<page>. Debian's python3 on purpose: the selenium it runs is the
# packaged one.
if(NOT MK_SANITIZE)
  file(GLOB MK_BROWSER_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/browser/test_*.py)
  foreach(src ${MK_BROWSER_TESTS})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^test_" "" page ${name})
    add_test(NAME browser/${page} COMMAND /usr/bin/python3 ${src})
    set_tests_properties(browser/${page} PROPERTIES TIMEOUT 2400
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
      ENVIRONMENT "MKENGINE_HOME=${CMAKE_SOURCE_DIR};MKENGINE_BUILD=${CMAKE_BINARY_DIR}")
  endforeach()
endif()
