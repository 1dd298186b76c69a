# mk/install.mk — `make install`: where hmm's files go, included by the
# Makefile after its build rules (it uses their variables: LIBHMM_SO,
# HK_SO, LIBHMM_A, TOOL_BINS, HK_SRC, BIND_SRC).
#
#   make install [DESTDIR=/tmp/img] [PREFIX=/usr/local] [LIBDIR=...]
#
# The pkg-config files are written here, at install time, for the
# PREFIX and LIBDIR given (Debian's rules pass LIBDIR=/usr/lib/<triplet>).
# Only what the installed files need is built first: never the module
# (`make kmod-install` installs it), never the tests.

VERSION	   ?= 0.1.0
PREFIX	   ?= /usr/local
BINDIR	   ?= $(PREFIX)/bin
LIBDIR	   ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR	   ?= $(PREFIX)/share/man
DOCDIR	   ?= $(PREFIX)/share/doc/hmm
# /etc for PREFIX=/usr, else PREFIX/etc; systemd reads units and
# sysusers.d from /usr/local/lib as from /usr/lib.
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR	   ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
# The udev rule giving /dev/hmmk to group hmm: /etc unless PREFIX=/usr
# (a package's), as udev reads no /usr/local.
UDEVRULESDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/udev/rules.d,/etc/udev/rules.d)

# The static kernels' archive a trainer links: the CPU kernels and the
# offloaded step, the same objects as libhk.so.0.
HK_DIST_A := $(B)/dist/libhk.a
$(HK_DIST_A): $(call obj,$(HK_SRC) $(BIND_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# The headers a trainer includes, as <hmm/NAME.h> or, with the Cflags
# of hmm.pc, <NAME.h>: the library, the kernels, the module's uapi.
HMM_HEADERS := libhmm/include/hmm.h libhmm/include/dlpack.h \
	       kernels/core/hk.h kernels/core/hk_adamw.h kernels/core/hk_attn.h \
	       kernels/bind/hk_offload.h include/uapi/hmmk.h

# subst_install TEMPLATE DEST: TEMPLATE's @NAME@ filled in, as DEST
subst_install = sed -e 's,@PREFIX@,$(PREFIX),' -e 's,@LIBDIR@,$(LIBDIR),' \
	     -e 's,@INCLUDEDIR@,$(INCLUDEDIR),' -e 's,@VERSION@,$(VERSION),' \
	     -e 's,@BINDIR@,$(BINDIR),' -e 's,@SYSCONFDIR@,$(SYSCONFDIR),' \
	     $(1) >$(DESTDIR)$(2)

# pc_install TEMPLATE: write $(DESTDIR)$(LIBDIR)/pkgconfig/NAME.pc from it
pc_install = $(call subst_install,$(1),$(LIBDIR)/pkgconfig/$(basename $(notdir $(1))))

.PHONY: install install-lib install-bin install-service
install: install-lib install-bin install-service

install-lib: $(LIBHMM_SO) $(HK_SO) $(LIBHMM_A) $(HK_DIST_A)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/hmm \
		$(DESTDIR)$(MANDIR)/man3
	install -m 644 $(LIBHMM_A) $(HK_DIST_A) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(LIBHMM_SO) $(HK_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf libhmm.so.0 $(DESTDIR)$(LIBDIR)/libhmm.so
	ln -sf libhk.so.0 $(DESTDIR)$(LIBDIR)/libhk.so
	$(call pc_install,mk/hmm.pc.in)
	$(call pc_install,mk/hk.pc.in)
	install -m 644 $(HMM_HEADERS) $(DESTDIR)$(INCLUDEDIR)/hmm/
	install -m 644 $(wildcard man/*.3) $(DESTDIR)$(MANDIR)/man3/

install-bin: $(TOOL_BINS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man8
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(BINDIR)/
	install -m 644 $(wildcard man/*.1) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(wildcard man/*.8) $(DESTDIR)$(MANDIR)/man8/

# hmmd as a service: the unit for this BINDIR and SYSCONFDIR, the hmm
# user and group (sysusers.d), the example config as hmmd.conf unless
# one is there already (a reinstall keeps the admin's), and as a doc.
install-service:
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSCONFDIR)/hmm $(DESTDIR)$(DOCDIR)
	$(call subst_install,daemon/hmmd.service.in,$(UNITDIR)/hmmd.service)
	install -m 644 daemon/hmm.sysusers $(DESTDIR)$(SYSUSERSDIR)/hmm.conf
	install -d $(DESTDIR)$(UDEVRULESDIR)
	install -m 644 kmod/60-hmmk.rules $(DESTDIR)$(UDEVRULESDIR)/
	install -m 644 daemon/hmmd.conf.example $(DESTDIR)$(DOCDIR)/
	[ -e $(DESTDIR)$(SYSCONFDIR)/hmm/hmmd.conf ] || \
		install -m 644 daemon/hmmd.conf.example $(DESTDIR)$(SYSCONFDIR)/hmm/hmmd.conf

# ---- the module ---------------------------------------------------------
# make kmod-install [KVER=] [DESTDIR=]: hmmk.ko into
# /lib/modules/KVER/updates (modules_install), depmod, and the
# modules-load.d snippet that loads it at boot.  make install-dkms: the
# module's source as /usr/src/hmmk-VERSION with its dkms.conf, for
# `dkms install hmmk/VERSION` (the hmm-dkms package does that itself),
# and the same modules-load.d snippet.
MODLOADDIR ?= $(PREFIX)/lib/modules-load.d
DKMS_SRC   := /usr/src/hmmk-$(VERSION)
.PHONY: kmod-install install-dkms
modload_install = install -d $(DESTDIR)$(MODLOADDIR) && \
	install -m 644 kmod/hmmk.modules-load.conf $(DESTDIR)$(MODLOADDIR)/hmmk.conf
kmod-install: kmod
	$(if $(HAVE_KDIR),,@echo "kmod-install: no headers for '$(KVER)' (KVER= or KDIR=)" >&2; exit 1)
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_PATH=$(DESTDIR) \
		INSTALL_MOD_DIR=updates CONFIG_MODULE_SIG_ALL= modules_install
	depmod $(if $(DESTDIR),-b $(DESTDIR)) -a $(KVER)
	$(modload_install)

install-dkms:
	install -d $(DESTDIR)$(DKMS_SRC)/kmod $(DESTDIR)$(DKMS_SRC)/include/uapi
	install -m 644 Kbuild $(DESTDIR)$(DKMS_SRC)/
	install -m 644 kmod/Kbuild $(filter-out %.mod.c,$(wildcard kmod/*.c kmod/*.h)) $(DESTDIR)$(DKMS_SRC)/kmod/
	install -m 644 include/uapi/hmmk.h $(DESTDIR)$(DKMS_SRC)/include/uapi/
	$(call subst_install,kmod/dkms.conf,$(DKMS_SRC)/dkms.conf)
	$(modload_install)

# ---- Debian packages ----------------------------------------------------
# make deb: dpkg-buildpackage -b on a copy of the tree in $(B)/deb/src
# (so its ../ outputs land in $(B)/deb, not beside the checkout);
# the .deb files are $(B)/deb/*.deb.  Needs debhelper, dh-dkms, dh-python
# (scripts/deps.sh).
DEB_DIR := $(B)/deb
.PHONY: deb
deb:
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src
	{ git ls-files -co --exclude-standard 2>/dev/null || \
	  find . -path ./$(B) -prune -o -type f -print; } | \
		tar -cf - --ignore-failed-read -T - 2>/dev/null | tar -xf - -C $(DEB_DIR)/src
	cd $(DEB_DIR)/src && dpkg-buildpackage -b -us -uc
	@ls -l $(DEB_DIR)/*.deb
