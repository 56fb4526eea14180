; A stand-in for the frozen gpen-watch.exe, for tests/test_windows_installer.py: a 64-bit Windows
; program that makensis can build on Linux. It appends its arguments to %USERPROFILE%\standin-calls.log
; and does to the registry what gpen-watch's `service install` and `service uninstall` do there:
; the "gpen-watch" value under HKCU\...\CurrentVersion\Run (gpen_watch/platform/windows_login.py).
; makensis -DOUTFILE=...\gpen-watch.exe wine_standin.nsi
Unicode true
Target amd64-unicode
Name "gpen-watch stand-in"
OutFile "${OUTFILE}"
RequestExecutionLevel user
SilentInstall silent
!include "FileFunc.nsh"

Section
  ${GetParameters} $0
  FileOpen $1 "$PROFILE\standin-calls.log" a
  FileSeek $1 0 END
  FileWrite $1 "$0$\r$\n"
  FileClose $1
  StrCmp $0 "service install" 0 +2
    WriteRegStr HKCU "Software\Microsoft\Windows\CurrentVersion\Run" "gpen-watch" '"$EXEPATH" run'
  StrCmp $0 "service uninstall" 0 +2
    DeleteRegValue HKCU "Software\Microsoft\Windows\CurrentVersion\Run" "gpen-watch"
SectionEnd
