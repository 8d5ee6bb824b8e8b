/* libtessera_so.c — the shared library's own translation unit. libtessera.so is the static
 * library's objects linked whole (CMakeLists.txt, tessera_shared); a shared library target needs
 * one source of its own, and this is it. */
typedef int tsi_libtessera_so_unit;
