; The Windows installer around the PyInstaller folder (packaging/bundle/gpen-watch.spec, built on
; Windows by build.ps1). makensis /DVERSION=<pyproject's version> /DDIST=<the folder> gpen-watch.nsi
; Per-user install (no administrator rights): %LOCALAPPDATA%\Programs\gpen-watch, with a Start-menu
; entry and Explorer's "Send to > gpen-watch" (send-to.nsh).
; Silent install: setup.exe /S, with start at login: setup.exe /S /LOGIN; silent removal:
; uninstall.exe /S. tests/test_windows_installer.py runs all three under Wine.
Unicode true
; A 64-bit installer for a 64-bit program (PyTorch runs on x64 Windows only).
Target amd64-unicode
!ifndef VERSION
  !error "VERSION is not defined: build.ps1 passes pyproject.toml's version as /DVERSION=..."
!endif
!ifndef DIST
  !error "DIST is not defined: the PyInstaller folder (dist\gpen-watch), as /DDIST=..."
!endif
!ifndef OUTFILE
  !define OUTFILE "gpen-watch-${VERSION}-windows-x64-setup.exe"
!endif

!include "MUI2.nsh"
!include "FileFunc.nsh"
!include "send-to.nsh"

Name "gpen-watch ${VERSION}"
OutFile "${OUTFILE}"
InstallDir "$LOCALAPPDATA\Programs\gpen-watch"
RequestExecutionLevel user
SetCompressor /SOLID lzma

!define MUI_ICON "${DIST}\_internal\gpen_watch\data\gpen-watch.ico"
!define MUI_FINISHPAGE_RUN "$INSTDIR\gpen-watch.exe"
!define MUI_FINISHPAGE_RUN_PARAMETERS "run --open-if-running"
!define MUI_FINISHPAGE_RUN_TEXT "Start gpen-watch now"
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_COMPONENTS
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES
!insertmacro MUI_LANGUAGE "English"

Section "gpen-watch" SecMain
  SectionIn RO
  ; A service from an earlier install would hold its files open: ask it to stop first.
  ExecWait '"$INSTDIR\gpen-watch.exe" stop'
  SetOutPath "$INSTDIR"
  File /r "${DIST}\*"
  ; Explorer's "Send to > gpen-watch" (send-to.nsh).
  !insertmacro GpenWatchSendToInstall
  CreateDirectory "$SMPROGRAMS\gpen-watch"
  CreateShortcut "$SMPROGRAMS\gpen-watch\gpen-watch.lnk" "$INSTDIR\gpen-watch.exe" "run --open-if-running" \
    "$INSTDIR\_internal\gpen_watch\data\gpen-watch.ico"
  WriteUninstaller "$INSTDIR\uninstall.exe"
  WriteRegStr HKCU "Software\Microsoft\Windows\CurrentVersion\Uninstall\gpen-watch" "DisplayName" "gpen-watch"
  WriteRegStr HKCU "Software\Microsoft\Windows\CurrentVersion\Uninstall\gpen-watch" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "Software\Microsoft\Windows\CurrentVersion\Uninstall\gpen-watch" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "Software\Microsoft\Windows\CurrentVersion\Uninstall\gpen-watch" "DisplayIcon" "$INSTDIR\gpen-watch.exe"
SectionEnd

; Offered, not forced: gpen-watch's own login entry (a Run value under HKCU), as
; `gpen-watch service install` writes it.
Section /o "Start at login" SecLogin
  ExecWait '"$INSTDIR\gpen-watch.exe" service install'
SectionEnd

; /LOGIN on the command line ticks "Start at login" (for a silent install, which shows no page).
Function .onInit
  ${GetParameters} $0
  ClearErrors
  ${GetOptions} $0 "/LOGIN" $1
  IfErrors +2
    SectionSetFlags ${SecLogin} ${SF_SELECTED}
FunctionEnd

Section "Uninstall"
  ExecWait '"$INSTDIR\gpen-watch.exe" stop'
  ExecWait '"$INSTDIR\gpen-watch.exe" service uninstall'
  RMDir /r "$INSTDIR\_internal"
  Delete "$INSTDIR\gpen-watch.exe"
  Delete "$INSTDIR\README.txt"
  Delete "$INSTDIR\LICENSE"
  Delete "$INSTDIR\uninstall.exe"
  !insertmacro GpenWatchSendToUninstall
  RMDir "$INSTDIR"
  Delete "$SMPROGRAMS\gpen-watch\gpen-watch.lnk"
  RMDir "$SMPROGRAMS\gpen-watch"
  DeleteRegKey HKCU "Software\Microsoft\Windows\CurrentVersion\Uninstall\gpen-watch"
  ; Photos (Pictures\GPEN), settings, models and the journal are the user's: never removed here.
SectionEnd
