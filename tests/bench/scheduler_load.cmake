# The scheduler load generator (included from tests/CMakeLists.txt): a
# program that prints figures, not a test (CONVENTIONS.md #12).
# Its parts: the simulated workers, the report, main.
add_executable(normsweep-scheduler-load ${CMAKE_CURRENT_LIST_DIR}/scheduler_load.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_worker.cc ${CMAKE_CURRENT_LIST_DIR}/load_report.cc)
target_link_libraries(normsweep-scheduler-load PRIVATE normsweep_bench_setup normsweep_scheduler
  normsweep_postgres_store normsweep_test_subprocess normsweep_test_certificates absl::flags)
# By default it runs the scheduler as its own process, as deployed.
target_compile_definitions(normsweep-scheduler-load PRIVATE
  NORMSWEEP_SCHEDULER_BINARY="$<TARGET_FILE:normsweep-scheduler>")
add_dependencies(normsweep-scheduler-load normsweep-scheduler)

# Worker reconnect time over scheduler restarts (also a program that prints
# figures): the real scheduler, worker and trainer from this build.
add_executable(normsweep-worker-reconnect ${CMAKE_CURRENT_LIST_DIR}/worker_reconnect.cc)
target_link_libraries(normsweep-worker-reconnect PRIVATE normsweep_bench_setup normsweep_common
  normsweep_scheduler_proto normsweep_test_http normsweep_test_scheduler_process normsweep_test_certificates
  absl::flags)
target_compile_definitions(normsweep-worker-reconnect PRIVATE NORMSWEEP_BINARY_DIR_DEFAULT="${CMAKE_BINARY_DIR}")
add_dependencies(normsweep-worker-reconnect normsweep-scheduler normsweep-worker normsweep-train)
