# Installation: PREFIX (default /usr/local) and DESTDIR (staging root).
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
MANDIR      ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL     ?= install
HEADERS     := $(wildcard include/vijp/*.h)

# vijp.pc from vijp.pc.in: the directories of this install and the version.
$(BUILD)/vijp.pc: vijp.pc.in include/vijp/vijp.h FORCE
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	     -e 's|@VERSION@|$(VIJP_VERSION)|g' -e 's|@PKGS_PRIVATE@|$(filter-out mpfr,$(PKGS))|g' \
	     -e 's|@MPFI_CFLAGS@|$(MPFI_CFLAGS)|g' -e 's|@MPFI_LIBS@|$(FLINT_LIBS) $(MPFI_LIBS)|g' $< > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

install: all $(BUILD)/vijp.pc $(BUILD)/libvijp-public.a
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/vijp \
	  $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 755 $(BUILD)/vijp $(DESTDIR)$(BINDIR)/vijp
	$(INSTALL) -m 644 $(BUILD)/libvijp-public.a $(DESTDIR)$(LIBDIR)/libvijp.a
	$(INSTALL) -m 755 $(BUILD)/$(SHLIB) $(DESTDIR)$(LIBDIR)/$(SHLIB)
	ln -sf $(SHLIB) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libvijp.so
	$(if $(CUDA_SO),$(INSTALL) -m 755 $(CUDA_SO) $(DESTDIR)$(LIBDIR)/libvijp-cuda.so)
	$(INSTALL) -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/vijp/
	$(INSTALL) -m 644 $(BUILD)/vijp.pc $(DESTDIR)$(PKGCONFIGDIR)/vijp.pc
	$(INSTALL) -m 644 $(BUILD)/vijp.1 $(DESTDIR)$(MANDIR)/man1/vijp.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vijp $(DESTDIR)$(LIBDIR)/libvijp.a $(DESTDIR)$(LIBDIR)/$(SHLIB) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libvijp.so $(DESTDIR)$(LIBDIR)/libvijp-cuda.so \
	  $(DESTDIR)$(PKGCONFIGDIR)/vijp.pc $(DESTDIR)$(MANDIR)/man1/vijp.1 \
	  $(addprefix $(DESTDIR)$(INCLUDEDIR)/vijp/,$(notdir $(HEADERS)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/vijp 2>/dev/null
