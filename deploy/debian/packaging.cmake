# The Debian package (CPack DEB): the daemon, its unit and default configuration (installed by
# the top-level CMakeLists.txt), plus what operators deploy around it: the Prometheus rules, the
# Alertmanager and scrape examples, the Grafana dashboard, the runbooks.
#
#   cmake --build build && (cd build && cpack -G DEB)     -> build/kpathd_<version>_<arch>.deb
#
# Paths are relative to CPACK_PACKAGING_INSTALL_PREFIX (/usr) unless absolute (/etc).
set(KPATH_SHARE share/kpathd)
install(FILES deploy/prometheus/kpathd-rules.yml deploy/prometheus/prometheus.yml
  DESTINATION ${KPATH_SHARE}/prometheus)
install(PROGRAMS deploy/prometheus/set-runbook-base.sh DESTINATION ${KPATH_SHARE}/prometheus)
install(FILES deploy/alertmanager/alertmanager.yml DESTINATION ${KPATH_SHARE}/alertmanager)
install(FILES deploy/grafana/kpathd-dashboard.json DESTINATION ${KPATH_SHARE}/grafana)
install(FILES README.md DESTINATION share/doc/kpathd)
install(DIRECTORY docs/runbooks DESTINATION share/doc/kpathd FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kpathd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kpathd maintainers <kpathd@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "kernel pathology detector: eBPF probes and /proc sampling as Prometheus metrics")
set(CPACK_PACKAGE_DESCRIPTION
  "kpathd keeps eBPF probes attached and samples /proc to catch kernel pathologies: percpu
memory that only grows (dying memory cgroups), long IRQ-disabled regions, hidden kprobes and
BPF programs of third-party agents, madvise/TLB-shootdown storms. It serves them as
Prometheus metrics, and ships alert rules, runbooks and a Grafana dashboard.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies (libbpf1, libyaml-cpp0.7, ...) from the binary, by dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# civetweb loads libssl at run time for TLS only; Prometheus and Alertmanager are where the
# shipped rules and examples go, on this host or another.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus, prometheus-alertmanager, libssl-dev")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${CMAKE_CURRENT_LIST_DIR}/conffiles
  ${CMAKE_CURRENT_LIST_DIR}/postinst
  ${CMAKE_CURRENT_LIST_DIR}/prerm
  ${CMAKE_CURRENT_LIST_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
